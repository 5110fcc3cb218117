import { Type } from "typebox";
import { Nullable, Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { CreditsUpdate, Empty, Expires, ExternalId, KeyId, Meta, PermissionSlug, RatelimitsInput, ROLE_NAME_PATTERN } from "../schemas.js";

/** Three-state fields: omitted leaves the value, null clears it, a value sets it. */
export default defineProcedure({
  name: "keys.updateKey",
  audit: ["key.update"],
  body: Strict({
    keyId: KeyId,
    name: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 255 }))),
    externalId: Type.Optional(Nullable(ExternalId)),
    meta: Type.Optional(Nullable(Meta)),
    expires: Type.Optional(Nullable(Expires)),
    credits: Type.Optional(Nullable(CreditsUpdate)),
    ratelimits: Type.Optional(RatelimitsInput),
    enabled: Type.Optional(Type.Boolean()),
    roles: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100, pattern: ROLE_NAME_PATTERN }), { maxItems: 100 })),
    permissions: Type.Optional(Type.Array(PermissionSlug, { maxItems: 1000 })),
  }),
  data: Empty,
  handler: async ({ body, caller, services }) => {
    await services.keys.updateKey(caller, body);
    return {};
  },
});
