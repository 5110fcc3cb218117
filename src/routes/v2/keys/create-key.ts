import { Type } from "typebox";
import { ID_PATTERN, Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { ApiId, CreditsCreate, Expires, ExternalId, Meta, PermissionSlug, RatelimitsInput, ROLE_NAME_PATTERN } from "../schemas.js";

export default defineProcedure({
  name: "keys.createKey",
  audit: ["key.create"],
  body: Strict({
    apiId: ApiId,
    prefix: Type.Optional(Type.String({ minLength: 1, maxLength: 16, pattern: ID_PATTERN })),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    byteLength: Type.Integer({ minimum: 16, maximum: 255, default: 16 }),
    externalId: Type.Optional(ExternalId),
    meta: Type.Optional(Meta),
    roles: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100, pattern: ROLE_NAME_PATTERN }), { maxItems: 100 })),
    permissions: Type.Optional(Type.Array(PermissionSlug, { maxItems: 1000 })),
    expires: Type.Optional(Expires),
    credits: Type.Optional(CreditsCreate),
    ratelimits: Type.Optional(RatelimitsInput),
    enabled: Type.Boolean({ default: true }),
    recoverable: Type.Boolean({ default: false }),
  }),
  data: Type.Object({ keyId: Type.String(), key: Type.String() }),
  handler: ({ body, caller, services }) => services.keys.createKey(caller, body),
});
