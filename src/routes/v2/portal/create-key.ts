import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { ApiId } from "../schemas.js";
import { sessionOf } from "./session.js";

/** keygate's own: a key for the session's customer with the portal's defaults (scope keys:create). */
export default defineProcedure({
  name: "portal.createKey",
  audit: ["key.create"],
  noStore: true,
  body: Strict({ name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })), apiId: Type.Optional(ApiId) }),
  data: Type.Object({ keyId: Type.String(), key: Type.String() }),
  handler: (context) => context.services.portals.customers.createKey(sessionOf(context), context.body),
});
