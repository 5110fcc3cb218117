import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { RoleReference, RoleResponse } from "../schemas.js";

export default defineProcedure({
  name: "permissions.getRole",
  audit: "none",
  body: Strict({ role: RoleReference }),
  data: RoleResponse,
  handler: ({ body, caller, services }) => services.rbac.getRole(caller, body),
});
