import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { KeyId, RoleName, RoleResponse } from "../schemas.js";

export default defineProcedure({
  name: "keys.setRoles",
  audit: ["key.update"],
  body: Strict({ keyId: KeyId, roles: Type.Array(RoleName, { minItems: 0, maxItems: 100 }) }),
  data: Type.Array(RoleResponse),
  handler: ({ body, caller, services }) => services.keyAccess.setRoles(caller, body),
});
