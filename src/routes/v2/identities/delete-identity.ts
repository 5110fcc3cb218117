import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { Empty } from "../schemas.js";

export default defineProcedure({
  name: "identities.deleteIdentity",
  audit: ["identity.delete"],
  // The official SDK expects this procedure's errors (and only this one's) as application/problem+json.
  problemJsonErrors: true,
  body: Strict({ identity: Type.String({ minLength: 1, maxLength: 255 }) }),
  data: Empty,
  handler: async ({ body, caller, services }) => {
    await services.identities.deleteIdentity(caller, body);
    return {};
  },
});
