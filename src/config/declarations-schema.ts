import { type Static, Type } from "typebox";
import { MIGRATION_SCHEMES } from "../domain/keys/key-migrations.js";
import { describedPattern } from "../http/patterns.js";
import { EXTERNAL_ID_PATTERN, ID_PATTERN, NAME_PATTERN, Strict } from "../http/schemas.js";
import { MAX_IP_ALLOWLIST_ENTRIES } from "../lib/ip-allowlist.js";

// What the file declares for the stores to hold from start-up: root keys, APIs and key migrations.

const WorkspaceId = Type.String({ minLength: 1, maxLength: 255, pattern: ID_PATTERN });

export const RootKeyConfigSchema = Strict({
  /** The plaintext root key. Give either this or `hash`. */
  key: Type.Optional(Type.String({ minLength: 8, maxLength: 512 })),
  /** base64 SHA-256 of the root key, so the file need not hold the secret (`printf %s "$KEY" | openssl dgst -sha256 -binary | base64`). */
  hash: Type.Optional(
    Type.String({ pattern: describedPattern("^[A-Za-z0-9+/]{43}=$", "be a SHA-256 hash in base64 (44 characters ending in =)") }),
  ),
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  workspaceId: WorkspaceId,
  permissions: Type.Array(Type.String({ minLength: 1, maxLength: 512 }), { minItems: 1, maxItems: 1000 }),
  /** Unix ms after which the key is refused. */
  expires: Type.Optional(Type.Integer({ minimum: 0 })),
});

export const DeclaredApiSchema = Strict({
  id: Type.String({ minLength: 8, maxLength: 255, pattern: ID_PATTERN }),
  name: Type.String({ minLength: 3, maxLength: 255, pattern: NAME_PATTERN }),
  workspaceId: WorkspaceId,
  /** When true, apis.deleteApi answers 412 protected_resource. */
  deleteProtection: Type.Boolean({ default: false }),
  /**
   * Addresses and CIDR ranges keys of the API may be verified from (checked after the schema). When given it
   * replaces the API's allowlist at every start-up, [] removing it; when absent, keygate.setApiIpAllowlist decides.
   */
  ipAllowlist: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: MAX_IP_ALLOWLIST_ENTRIES })),
});

/** A key migration keys.migrateKeys may name (docs/migration.md): where the keys go and how the old system hashed them. */
export const MigrationSchema = Strict({
  /** What keys.migrateKeys and keys.verifyKey call it (`migrationId`); unique within the workspace. */
  id: Type.String({ minLength: 3, maxLength: 255, pattern: EXTERNAL_ID_PATTERN }),
  workspaceId: WorkspaceId,
  scheme: Type.Unsafe<(typeof MIGRATION_SCHEMES)[number]>({ type: "string", enum: [...MIGRATION_SCHEMES] }),
});

export type RootKeyConfig = Static<typeof RootKeyConfigSchema>;
export type DeclaredApi = Static<typeof DeclaredApiSchema>;
