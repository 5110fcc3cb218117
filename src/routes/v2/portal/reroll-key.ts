import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { Expires, KeyId } from "../schemas.js";
import { sessionOf } from "./session.js";

export default defineProcedure({
  name: "portal.rerollKey",
  audit: ["key.reroll"],
  noStore: true,
  body: Strict({ keyId: KeyId, expiration: Expires }),
  data: Type.Object({ keyId: Type.String(), key: Type.String() }),
  handler: (context) => context.services.portals.customers.rerollKey(sessionOf(context), context.body),
});
