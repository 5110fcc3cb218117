import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { KeyId, PermissionResponse, PermissionSlug } from "../schemas.js";

export default defineProcedure({
  name: "keys.setPermissions",
  audit: ["key.update"],
  body: Strict({ keyId: KeyId, permissions: Type.Array(PermissionSlug, { minItems: 0, maxItems: 1000 }) }),
  data: Type.Array(PermissionResponse),
  handler: ({ body, caller, services }) => services.keyAccess.setPermissions(caller, body),
});
