import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { PermissionResponse, RbacPermissionSlug, RoleIdentifier } from "../schemas.js";

export default defineProcedure({
  name: "permissions.setRolePermissions",
  audit: ["role.update"],
  body: Strict({ roleId: RoleIdentifier, permissions: Type.Array(RbacPermissionSlug, { maxItems: 1000 }) }),
  data: Type.Array(PermissionResponse),
  handler: ({ body, caller, services }) => services.rbac.setRolePermissions(caller, body),
});
