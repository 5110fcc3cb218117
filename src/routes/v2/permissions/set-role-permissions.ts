import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { PermissionResponse, PermissionSlug } from "../schemas.js";

export default defineProcedure({
  name: "permissions.setRolePermissions",
  body: Strict({ roleId: Type.String({ minLength: 1, maxLength: 512 }), permissions: Type.Array(PermissionSlug, { maxItems: 1000 }) }),
  data: Type.Array(PermissionResponse),
  handler: ({ body, caller, services }) => services.rbac.setRolePermissions(caller, body),
});
