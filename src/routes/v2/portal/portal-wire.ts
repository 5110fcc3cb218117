import { Type } from "typebox";
import { describedPattern } from "../../../http/patterns.js";
import { Nullable, Strict, StringEnum } from "../../../http/schemas.js";
import { CreditsCreate, PermissionSlug, RatelimitRequest, RoleReference } from "../schemas.js";

/** A portal by id or slug (Unkey's ResourceIdentifier). */
export const PortalIdentifier = Type.String({
  minLength: 3,
  maxLength: 255,
  pattern: describedPattern("^[a-zA-Z0-9_-]+$", "contain only letters, digits, _ and -"),
});

/** The path segment of the portal's pages: lower-case, no leading _ (keygate's own assets live under /portal/_ui). */
export const Slug = Type.String({
  minLength: 3,
  maxLength: 64,
  pattern: describedPattern("^[a-z0-9][a-z0-9-]*$", "contain only lower-case letters, digits and -, starting with a letter or digit"),
});

export const Mapping = Strict({
  type: StringEnum(["keyspace", "route"] as const),
  /** An API id for `keyspace`; a route's id or name for `route`. */
  id: Type.String({ minLength: 3, maxLength: 255 }),
});

/** Checked to be an http(s) URL by the portal service (a pattern cannot say it well). */
const HttpsUrl = Type.String({ minLength: 8, maxLength: 500 });
export const LogoUrl = HttpsUrl;
export const ReturnUrl = HttpsUrl;
export const PrimaryColor = Type.String({ pattern: describedPattern("^#[0-9a-fA-F]{6}$", "be a colour written #rrggbb") });

export const KeyDefaults = Strict({
  prefix: Type.Optional(
    Type.String({ minLength: 1, maxLength: 16, pattern: describedPattern("^[a-zA-Z0-9_]+$", "contain only letters, digits and _") }),
  ),
  byteLength: Type.Optional(Type.Integer({ minimum: 16, maximum: 255 })),
  ratelimits: Type.Optional(Type.Array(RatelimitRequest, { maxItems: 50 })),
  credits: Type.Optional(CreditsCreate),
  permissions: Type.Optional(Type.Array(PermissionSlug, { maxItems: 1000 })),
  roles: Type.Optional(Type.Array(RoleReference, { maxItems: 1000 })),
});

export const PortalResponse = Type.Object({
  portalId: Type.String(),
  slug: Type.String(),
  displayName: Type.String(),
  mapping: Type.Object({ type: Type.String(), id: Type.String() }),
  enabled: Type.Boolean(),
  logoUrl: Type.Optional(Type.String()),
  primaryColor: Type.Optional(Type.String()),
  keyDefaults: Type.Optional(KeyDefaults),
  createdAt: Type.Integer(),
  updatedAt: Type.Optional(Type.Integer()),
});

export const DisplayName = Type.String({ minLength: 1, maxLength: 100 });
export const NullableLogoUrl = Nullable(LogoUrl);
export const NullablePrimaryColor = Nullable(PrimaryColor);
export const NullableKeyDefaults = Nullable(KeyDefaults);

export const Scope = StringEnum(["keys:read", "keys:create", "keys:reroll", "analytics:read"] as const);
