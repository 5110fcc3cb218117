import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { PermissionSlug, RoleName } from "../schemas.js";

export default defineProcedure({
  name: "permissions.createRole",
  body: Strict({
    name: RoleName,
    description: Type.Optional(Type.String({ maxLength: 2048 })),
    permissions: Type.Optional(Type.Array(PermissionSlug, { maxItems: 1000 })),
  }),
  data: Type.Object({ roleId: Type.String() }),
  handler: ({ body, caller, services }) => services.rbac.createRole(caller, body),
});
