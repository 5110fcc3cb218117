import { Type } from "typebox";
import { describedPattern } from "../../http/patterns.js";
import { EXTERNAL_ID_PATTERN, ID_PATTERN, JsonObject, Nullable, Strict, StringEnum } from "../../http/schemas.js";

/**
 * Schemas several procedures share: what a named rate limit, credits, a key, a permission, a role and an
 * identity look like on the wire (the SDK's models). Bounds are the official schemas', except where docs/api.md
 * lists a difference.
 */

/** Characters of permission slugs; the same as the permission query language accepts in a name. */
export const PERMISSION_SLUG_PATTERN = describedPattern(
  "^[a-zA-Z0-9_:\\-\\.\\*/]+$",
  "contain only letters, digits and the characters _ : - . * /",
);
export const ROLE_NAME_PATTERN = describedPattern("^[a-zA-Z0-9_:\\-\\.\\*]+$", "contain only letters, digits and the characters _ : - . *");
/** Tags recorded with a verification. */
export const TAG_PATTERN = describedPattern("^[a-zA-Z0-9_=/.:-]+$", "contain only letters, digits and the characters _ = / . : -");
export const MAX_EXPIRES = 4_102_444_800_000;

export const KeyId = Type.String({ minLength: 3, maxLength: 255, pattern: ID_PATTERN });
export const ApiId = Type.String({ minLength: 3, maxLength: 255, pattern: ID_PATTERN });
export const ExternalId = Type.String({ minLength: 1, maxLength: 255, pattern: EXTERNAL_ID_PATTERN });
export const Expires = Type.Integer({ minimum: 0, maximum: MAX_EXPIRES });
export const Cursor = Type.String({ minLength: 1, maxLength: 1024 });
export const Search = Type.String({ minLength: 1, maxLength: 256 });
export const PageLimit = Type.Integer({ minimum: 1, maximum: 100, default: 100 });
export const Meta = JsonObject;

/** A permission slug as keys.* take it: each 1-100 characters. */
export const PermissionSlug = Type.String({ minLength: 1, maxLength: 100, pattern: PERMISSION_SLUG_PATTERN });
/**
 * A permission slug (or, where the procedure says so, a `perm_` id) as the permissions.* procedures take it: up to
 * 128 characters, the length permissions.createPermission allows, as in the official schemas.
 */
export const RbacPermissionSlug = Type.String({ minLength: 1, maxLength: 128, pattern: PERMISSION_SLUG_PATTERN });
/** A role name as permissions.createRole and keys.addRoles/removeRoles/setRoles take it (official: 1-128). */
export const RoleName = Type.String({ minLength: 1, maxLength: 128, pattern: ROLE_NAME_PATTERN });
/** A role addressed by its id or name (permissions.getRole, deleteRole). */
export const RoleReference = Type.String({ minLength: 1, maxLength: 128 });
/**
 * The role of permissions.setRolePermissions: the official ResourceIdentifier (3-255 characters of letters, digits,
 * `_` and `-`). keygate also finds a role by a name that fits these rules.
 */
export const RoleIdentifier = Type.String({
  minLength: 3,
  maxLength: 255,
  pattern: describedPattern("^[a-zA-Z0-9_-]+$", "contain only letters, digits, _ and -"),
});

export const RatelimitRequest = Strict({
  name: Type.String({ minLength: 3, maxLength: 128 }),
  limit: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
  duration: Type.Integer({ minimum: 1_000, maximum: 2_592_000_000 }),
  autoApply: Type.Boolean({ default: false }),
});
export const RatelimitsInput = Type.Array(RatelimitRequest, { maxItems: 50 });

export const RatelimitResponse = Type.Object({
  id: Type.String(),
  name: Type.String(),
  limit: Type.Integer(),
  duration: Type.Integer(),
  autoApply: Type.Boolean(),
});

/** Balances stay exact integers in JSON and in the Lua step (they are written in full there). */
export const CreditAmount = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });

export const Refill = Strict({
  interval: StringEnum(["daily", "monthly"]),
  amount: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
  refillDay: Type.Optional(Type.Integer({ minimum: 1, maximum: 31 })),
});

/** keygate's extension to credits: a verification that takes the balance to at or below it posts a notice. */
const LowThreshold = CreditAmount;

export const CreditsCreate = Strict({
  remaining: Nullable(CreditAmount),
  refill: Type.Optional(Refill),
  lowThreshold: Type.Optional(LowThreshold),
});

export const CreditsUpdate = Strict({
  remaining: Type.Optional(Nullable(CreditAmount)),
  refill: Type.Optional(Nullable(Refill)),
  lowThreshold: Type.Optional(Nullable(LowThreshold)),
});

export const CreditsResponse = Type.Object({
  remaining: Nullable(Type.Integer()),
  refill: Type.Optional(Type.Object({ interval: Type.String(), amount: Type.Integer(), refillDay: Type.Optional(Type.Integer()) })),
  lowThreshold: Type.Optional(Type.Integer()),
});

export const PermissionResponse = Type.Object({
  id: Type.String(),
  name: Type.String(),
  slug: Type.String(),
  description: Type.Optional(Type.String()),
});

export const RoleResponse = Type.Object({
  id: Type.String(),
  name: Type.String(),
  description: Type.Optional(Type.String()),
  permissions: Type.Optional(Type.Array(PermissionResponse)),
});

export const IdentityResponse = Type.Object({
  id: Type.String(),
  externalId: Type.String(),
  meta: Type.Optional(Meta),
  ratelimits: Type.Optional(Type.Array(RatelimitResponse)),
});

/** An identity as the identities.* procedures show it: keygate's extension adds its credits, when it has some. */
export const IdentityWithCreditsResponse = Type.Object({
  id: Type.String(),
  externalId: Type.String(),
  meta: Type.Optional(Meta),
  ratelimits: Type.Optional(Type.Array(RatelimitResponse)),
  credits: Type.Optional(CreditsResponse),
});

/** A key as getKey, whoami and listKeys show it. There is deliberately no field for the hash. */
export const KeyResponse = Type.Object({
  keyId: Type.String(),
  start: Type.String(),
  enabled: Type.Boolean(),
  name: Type.Optional(Type.String()),
  meta: Type.Optional(Meta),
  createdAt: Type.Integer(),
  updatedAt: Type.Optional(Type.Integer()),
  expires: Type.Optional(Type.Integer()),
  permissions: Type.Optional(Type.Array(Type.String())),
  roles: Type.Optional(Type.Array(Type.String())),
  credits: Type.Optional(CreditsResponse),
  identity: Type.Optional(IdentityResponse),
  plaintext: Type.Optional(Type.String()),
  ratelimits: Type.Optional(Type.Array(RatelimitResponse)),
});

export const Empty = Type.Object({});

/**
 * A permission a root key holds (keygate.createRootKey): `resource.<id|*>.action`, a `prefix.*` wildcard or `*`,
 * in the characters of a permission slug, up to 512 as in the configuration's root keys.
 */
export const RootKeyPermission = Type.String({ minLength: 1, maxLength: 512, pattern: PERMISSION_SLUG_PATTERN });

/** A stored root key as keygate.listRootKeys shows it: never the key or its hash. */
export const RootKeyResponse = Type.Object({
  rootKeyId: Type.String(),
  name: Type.Optional(Type.String()),
  permissions: Type.Array(Type.String()),
  createdAt: Type.Integer(),
  expires: Type.Optional(Type.Integer()),
  revokedAt: Type.Optional(Type.Integer()),
});
