import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { RbacPermissionSlug, RoleName } from "../schemas.js";

export default defineProcedure({
  name: "permissions.createRole",
  audit: ["role.create"],
  body: Strict({
    name: RoleName,
    description: Type.Optional(Type.String({ maxLength: 512 })),
    permissions: Type.Optional(Type.Array(RbacPermissionSlug, { maxItems: 1000 })),
  }),
  data: Type.Object({ roleId: Type.String() }),
  handler: ({ body, caller, services }) => services.rbac.createRole(caller, body),
});
