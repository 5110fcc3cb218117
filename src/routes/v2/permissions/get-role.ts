import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { RoleResponse } from "../schemas.js";

export default defineProcedure({
  name: "permissions.getRole",
  body: Strict({ role: Type.String({ minLength: 1, maxLength: 512 }) }),
  data: RoleResponse,
  handler: ({ body, caller, services }) => services.rbac.getRole(caller, body),
});
