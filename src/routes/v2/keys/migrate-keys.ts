import { Type } from "typebox";
import { EXTERNAL_ID_PATTERN, Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { ApiId, CreditsCreate, Expires, ExternalId, Meta, PermissionSlug, RatelimitsInput, ROLE_NAME_PATTERN } from "../schemas.js";

/** Keys one request may bring; `keygate keys migrate` sends a large file in requests of at most this many. */
export const MAX_MIGRATED_KEYS_PER_REQUEST = 10_000;

/** One key to import: the hash the old system stored, and createKey's fields (the CLI reads its file with this). */
export const MigratedKey = Strict({
  hash: Type.String({ minLength: 3, maxLength: 512 }),
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  externalId: Type.Optional(ExternalId),
  meta: Type.Optional(Meta),
  roles: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100, pattern: ROLE_NAME_PATTERN }), { maxItems: 100 })),
  permissions: Type.Optional(Type.Array(PermissionSlug, { maxItems: 1000 })),
  expires: Type.Optional(Expires),
  enabled: Type.Boolean({ default: true }),
  credits: Type.Optional(CreditsCreate),
  ratelimits: Type.Optional(RatelimitsInput),
});

/** Partial success is a 200: hashes a key already holds are listed in data.failed, never overwritten. */
export default defineProcedure({
  name: "keys.migrateKeys",
  audit: ["key.create"],
  body: Strict({
    migrationId: Type.String({ minLength: 3, maxLength: 255, pattern: EXTERNAL_ID_PATTERN }),
    apiId: ApiId,
    keys: Type.Array(MigratedKey, { minItems: 1, maxItems: MAX_MIGRATED_KEYS_PER_REQUEST }),
  }),
  data: Type.Object({
    migrated: Type.Array(Type.Object({ hash: Type.String(), keyId: Type.String() })),
    failed: Type.Array(Type.String()),
  }),
  handler: ({ body, caller, services }) => services.keyMigrations.migrateKeys(caller, body),
});
