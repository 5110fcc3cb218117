import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { PermissionResponse, RbacPermissionSlug } from "../schemas.js";

export default defineProcedure({
  name: "permissions.getPermission",
  audit: "none",
  /** A permission by its `perm_` id or its slug. */
  body: Strict({ permission: RbacPermissionSlug }),
  data: PermissionResponse,
  handler: ({ body, caller, services }) => services.rbac.getPermission(caller, body),
});
