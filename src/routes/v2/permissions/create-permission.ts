import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { PERMISSION_SLUG_PATTERN } from "../schemas.js";

export default defineProcedure({
  name: "permissions.createPermission",
  audit: ["permission.create"],
  body: Strict({
    name: Type.String({ minLength: 1, maxLength: 512 }),
    slug: Type.String({ minLength: 1, maxLength: 128, pattern: PERMISSION_SLUG_PATTERN }),
    description: Type.Optional(Type.String({ maxLength: 512 })),
  }),
  data: Type.Object({ permissionId: Type.String() }),
  handler: ({ body, caller, services }) => services.rbac.createPermission(caller, body),
});
