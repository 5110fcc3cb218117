import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { IdentityResponse, Meta, TAG_PATTERN } from "../schemas.js";

/** A failed check is still a 200: the answer is in data.valid and data.code (docs/decisions.md#verification-codes). */
export default defineProcedure({
  name: "keys.verifyKey",
  body: Strict({
    key: Type.String({ minLength: 1, maxLength: 512 }),
    tags: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 256, pattern: TAG_PATTERN }), { maxItems: 20 })),
    permissions: Type.Optional(Type.String({ minLength: 1, maxLength: 1000 })),
    credits: Type.Optional(Strict({ cost: Type.Integer({ minimum: 0, maximum: 1_000_000_000 }) })),
    ratelimits: Type.Optional(
      Type.Array(
        Strict({
          name: Type.String({ minLength: 3, maxLength: 255 }),
          cost: Type.Integer({ minimum: 0, maximum: 1_000, default: 1 }),
          limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
          duration: Type.Optional(Type.Integer({ minimum: 1_000, maximum: 2_592_000_000 })),
        }),
        { maxItems: 50 },
      ),
    ),
    migrationId: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
  }),
  data: Type.Object({
    valid: Type.Boolean(),
    code: Type.String(),
    keyId: Type.Optional(Type.String()),
    name: Type.Optional(Type.String()),
    meta: Type.Optional(Meta),
    expires: Type.Optional(Type.Integer()),
    credits: Type.Optional(Type.Integer()),
    enabled: Type.Optional(Type.Boolean()),
    permissions: Type.Optional(Type.Array(Type.String())),
    roles: Type.Optional(Type.Array(Type.String())),
    identity: Type.Optional(IdentityResponse),
    ratelimits: Type.Optional(
      Type.Array(
        Type.Object({
          exceeded: Type.Boolean(),
          id: Type.String(),
          name: Type.String(),
          limit: Type.Integer(),
          duration: Type.Integer(),
          reset: Type.Integer(),
          remaining: Type.Integer(),
          autoApply: Type.Boolean(),
        }),
      ),
    ),
  }),
  handler: async ({ body, caller, services, requestId, clientAddress }) =>
    (await services.verification.verifyKey(caller, body, requestId, clientAddress)).data,
});
