import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { PermissionResponse } from "../schemas.js";

export default defineProcedure({
  name: "permissions.getPermission",
  body: Strict({ permission: Type.String({ minLength: 1, maxLength: 255 }) }),
  data: PermissionResponse,
  handler: ({ body, caller, services }) => services.rbac.getPermission(caller, body),
});
