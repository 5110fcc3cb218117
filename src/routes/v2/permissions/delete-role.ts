import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { Empty } from "../schemas.js";

export default defineProcedure({
  name: "permissions.deleteRole",
  body: Strict({ role: Type.String({ minLength: 1, maxLength: 512 }) }),
  data: Empty,
  handler: async ({ body, caller, services }) => {
    await services.rbac.deleteRole(caller, body);
    return {};
  },
});
