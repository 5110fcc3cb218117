import { type Static, Type } from "typebox";
import type { Verification } from "../../../domain/verification/verification.js";
import { Strict, StringEnum } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { IdentityResponse, Meta, TAG_PATTERN } from "../schemas.js";

const VerificationData = Type.Object({
  valid: Type.Boolean(),
  code: Type.String(),
  keyId: Type.Optional(Type.String()),
  name: Type.Optional(Type.String()),
  meta: Type.Optional(Meta),
  expires: Type.Optional(Type.Integer()),
  credits: Type.Optional(Type.Integer()),
  /** keygate's extension: which balance `credits` is, once the key's identity has one (docs/decisions.md#identity-credits). */
  creditsSource: Type.Optional(StringEnum(["key", "identity"])),
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
});

/** A failed check is still a 200: the answer is in data.valid and data.code (docs/decisions.md#verification-codes). */
export default defineProcedure({
  name: "keys.verifyKey",
  audit: "none",
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
  data: VerificationData,
  handler: async ({ body, caller, services, requestId, clientAddress }) =>
    verificationData(await services.verification.verifyKey(caller, body, requestId, clientAddress)),
});

/**
 * A verification as keys.verifyKey answers it: the key's fields once it is known to exist, its balance where the
 * verification shows one, and the key's (and its identity's) limits that were checked. Every verification builds
 * one: the fields are assigned in the answer's order, not spread (docs/architecture.md#conventions).
 */
function verificationData(verification: Verification): Static<typeof VerificationData> {
  if (verification.code === "NOT_FOUND") return { valid: false, code: "NOT_FOUND" };
  const { valid, code, key } = verification;
  const ratelimits = [];
  for (const limit of verification.limits) {
    if (limit.kind !== "key") continue;
    ratelimits.push({
      exceeded: !limit.passed,
      id: limit.id,
      name: limit.name,
      limit: limit.check.limit,
      duration: limit.check.durationMs,
      reset: limit.resetAt,
      remaining: limit.remaining,
      autoApply: limit.autoApply,
    });
  }
  const shown = key.shown;
  const data: Static<typeof VerificationData> = { valid, code, keyId: shown.keyId };
  if (shown.name !== undefined) data.name = shown.name;
  if (shown.meta !== undefined) data.meta = shown.meta;
  if (shown.expires !== undefined) data.expires = shown.expires;
  data.enabled = shown.enabled;
  if (shown.permissions !== undefined) data.permissions = shown.permissions;
  if (shown.roles !== undefined) data.roles = shown.roles;
  if (shown.identity !== undefined) data.identity = shown.identity;
  if (verification.credits !== undefined) {
    data.credits = verification.credits;
    // Said only where there is a choice, so a key without identity credits answers exactly as Unkey's would.
    const source = verification.creditsSource;
    if (source === "identity" || (source === "key" && key.identityHasCredits)) data.creditsSource = source;
  }
  if (ratelimits.length > 0) data.ratelimits = ratelimits;
  return data;
}
