import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { Empty, RbacPermissionSlug } from "../schemas.js";

export default defineProcedure({
  name: "permissions.deletePermission",
  audit: ["permission.delete"],
  /** A permission by its `perm_` id or its slug. */
  body: Strict({ permission: RbacPermissionSlug }),
  data: Empty,
  handler: async ({ body, caller, services }) => {
    await services.rbac.deletePermission(caller, body);
    return {};
  },
});
