import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { Empty, RoleReference } from "../schemas.js";

export default defineProcedure({
  name: "permissions.deleteRole",
  audit: ["role.delete"],
  body: Strict({ role: RoleReference }),
  data: Empty,
  handler: async ({ body, caller, services }) => {
    await services.rbac.deleteRole(caller, body);
    return {};
  },
});
