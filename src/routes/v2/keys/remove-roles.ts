import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { KeyId, RoleName, RoleResponse } from "../schemas.js";

export default defineProcedure({
  name: "keys.removeRoles",
  audit: ["authorization.disconnect_role_and_key"],
  body: Strict({ keyId: KeyId, roles: Type.Array(RoleName, { minItems: 1, maxItems: 100 }) }),
  data: Type.Array(RoleResponse),
  handler: ({ body, caller, services }) => services.keyAccess.removeRoles(caller, body),
});
