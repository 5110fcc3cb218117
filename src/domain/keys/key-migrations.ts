import { invalidAt, invalidInput, isKeygateError, KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { defined } from "../../lib/defined.js";
import { hashKey, KEY_HASH_PATTERN, sha256Hex } from "../../lib/hash.js";
import { newId } from "../../lib/ids.js";
import type { KeyStore } from "../../storage/interfaces.js";
import type { CreditRecord, KeyRecord } from "../../storage/records.js";
import type { ApiService } from "../apis/api-service.js";
import { type AuditTrail, UNAUDITED } from "../audit/audit-trail.js";
import type { Caller } from "../caller.js";
import { type CreditsInput, creditsForNewKey } from "../credits.js";
import type { IdentityService } from "../identities/identity-service.js";
import type { CacheInvalidator } from "../invalidation.js";
import { checkMeta, MAX_KEY_META_BYTES } from "../meta.js";
import { type NamedLimitInput, replaceNamedLimits } from "../named-limits.js";
import type { RbacService } from "../rbac/rbac-service.js";
import { requireApi } from "../root-keys/permissions.js";

/**
 * How the system keys are imported from stored them:
 * - `sha256-hex`, `sha256-base64`: SHA-256 of the whole key. keygate stores the same digest (in base64), so an
 *   imported key verifies at once, with or without a migration id.
 * - `prefixed-api-key`: the tokens of seamapi's prefixed-api-key, `<prefix>_<shortToken>_<longToken>`, stored as
 *   the hex SHA-256 of the long token alone. keygate cannot derive its own hash from that, so the key is kept
 *   pending until keys.verifyKey first sees it with the migration id.
 */
export const MIGRATION_SCHEMES = ["sha256-hex", "sha256-base64", "prefixed-api-key"] as const;
export type MigrationScheme = (typeof MIGRATION_SCHEMES)[number];

/** A migration the operator declared in the configuration: its id within the workspace and the old system's scheme. */
export interface MigrationDeclaration {
  id: string;
  workspaceId: string;
  scheme: MigrationScheme;
}

interface SchemeRules {
  /** Says what a hash of this scheme must look like, for the 400 that refuses another. */
  shape: string;
  /** The hash to store for one keys.migrateKeys was given, and whether it is keygate's own; null: not of this scheme. */
  imported(hash: string): { hash: string; native: boolean } | null;
  /** Pending schemes: the old hash of a presented key and the `start` it gets; null when the key has another shape. */
  locate?(key: string): { hash: string; start: string } | null;
}

const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;
/** How many characters after the prefix `start` shows, as for keys keygate issues. */
const START_LENGTH = 4;

const SCHEMES: Record<MigrationScheme, SchemeRules> = {
  "sha256-hex": {
    shape: "a SHA-256 digest in hex (64 characters 0-9, a-f)",
    imported: (hash) => (HEX_SHA256.test(hash) ? { hash: Buffer.from(hash, "hex").toString("base64"), native: true } : null),
  },
  "sha256-base64": {
    shape: "a SHA-256 digest in standard base64 (44 characters ending in =)",
    imported: (hash) => (KEY_HASH_PATTERN.test(hash) ? { hash, native: true } : null),
  },
  "prefixed-api-key": {
    shape: "the hex SHA-256 of the token's long part (64 characters 0-9, a-f)",
    imported: (hash) => (HEX_SHA256.test(hash) ? { hash: hash.toLowerCase(), native: false } : null),
    locate: (key) => {
      // Read from the right: the short and long tokens hold no '_', the prefix may.
      const parts = key.split("_");
      if (parts.length < 3 || parts.some((part) => part === "")) return null;
      const longToken = parts[parts.length - 1] as string;
      const shortToken = parts[parts.length - 2] as string;
      const prefix = parts.slice(0, -2).join("_");
      return { hash: sha256Hex(longToken), start: `${prefix}_${`${shortToken}_${longToken}`.slice(0, START_LENGTH)}` };
    },
  },
};

/** One key of keys.migrateKeys: the old system's hash and createKey's fields. */
export interface MigrateKeyInput {
  hash: string;
  name?: string;
  externalId?: string;
  meta?: Record<string, unknown>;
  roles?: string[];
  permissions?: string[];
  expires?: number;
  enabled: boolean;
  credits?: CreditsInput;
  ratelimits?: NamedLimitInput[];
}

export interface MigrateKeysInput {
  migrationId: string;
  apiId: string;
  keys: MigrateKeyInput[];
}

/** Each hash given appears once: migrated with its new key id, or failed because a key already holds it. */
export interface MigrateKeysResult {
  migrated: { hash: string; keyId: string }[];
  failed: string[];
}

export interface KeyMigrationDeps {
  keys: KeyStore;
  apis: ApiService;
  rbac: RbacService;
  identities: IdentityService;
  invalidator: CacheInvalidator;
  clock: Clock;
  migrations: readonly MigrationDeclaration[];
  audit?: AuditTrail;
}

/**
 * Keys written to the store at once. On Redis they go out together (auto-pipelining) and each must be answered
 * within storage.redis.commandTimeoutMs of being sent: a group Redis works through in a few tens of milliseconds
 * keeps far from it, and ten groups make a call of 10,000 keys.
 */
const CREATES_AT_ONCE = 1_000;
/** Byte length recorded for an imported key: what rerollKey gives its successor (keygate's default). */
const IMPORTED_BYTE_LENGTH = 16;

/**
 * Bringing keys from another system: keys.migrateKeys (and the CLI's import) stores them under the hash that
 * system kept, and keys.verifyKey with a migration id finds a pending one by that system's scheme and rewrites it
 * to keygate's own hash on the spot. Migrations are declared by the operator per workspace.
 */
export class KeyMigrationService {
  private readonly deps: KeyMigrationDeps;
  private readonly declared = new Map<string, MigrationDeclaration>();

  constructor(deps: KeyMigrationDeps) {
    this.deps = deps;
    for (const migration of deps.migrations) this.declared.set(declaredKey(migration.workspaceId, migration.id), migration);
  }

  async migrateKeys(caller: Caller, input: MigrateKeysInput): Promise<MigrateKeysResult> {
    caller.authorize(requireApi("create_key", input.apiId));
    const workspaceId = caller.workspaceId;
    const api = await this.deps.apis.findLive(workspaceId, input.apiId);
    const migration = this.declared.get(declaredKey(workspaceId, input.migrationId));
    if (!migration) {
      throw new KeygateError(
        "err:unkey:data:migration_not_found",
        `No migration '${input.migrationId}' is configured for this workspace; the operator declares migrations in the configuration.`,
      );
    }
    const rules = SCHEMES[migration.scheme];
    const now = this.deps.clock.now();
    // Everything is checked before anything is written: a 400 imports nothing.
    const checked = input.keys.map((key, index) =>
      atKey(index, () => {
        const imported = rules.imported(key.hash);
        if (!imported) throw invalidAt("body.hash", `is not ${rules.shape}, as the '${migration.scheme}' scheme of this migration stores`);
        checkMeta(key.meta, MAX_KEY_META_BYTES, "body.meta");
        return {
          imported,
          ratelimits: replaceNamedLimits([], key.ratelimits ?? [], "body.ratelimits", now),
          credits: creditsForNewKey(key.credits, now),
        };
      }),
    );
    // A migration brings many keys with few distinct role lists, permission lists and identities: each is resolved once.
    const roleIds = memoised((names: string[]) => this.deps.rbac.existingRoles(workspaceId, names).then((roles) => roles.map((r) => r.id)));
    const permissionIds = memoised((slugs: string[]) =>
      this.deps.rbac.permissionsForSlugs(workspaceId, slugs, null).then((permissions) => permissions.map((p) => p.id)),
    );
    // Roles must exist: all are looked up before permissions and identities are created for the keys.
    const rolesOfKeys: string[][] = [];
    for (const key of input.keys) rolesOfKeys.push(key.roles && key.roles.length > 0 ? await roleIds(key.roles) : []);
    // Identities are found or created all at once (one round trip each way), each distinct externalId once.
    const externalIds = [...new Set(input.keys.flatMap((key) => (key.externalId === undefined ? [] : [key.externalId])))];
    const identities = await Promise.all(externalIds.map((externalId) => this.deps.identities.findOrCreate(workspaceId, externalId)));
    const identityIds = new Map(externalIds.map((externalId, index) => [externalId, (identities[index] as { id: string }).id]));
    const records: { record: KeyRecord; credits: CreditRecord | null; native: boolean }[] = [];
    for (const [index, key] of input.keys.entries()) {
      const { imported, ratelimits, credits } = checked[index] as (typeof checked)[number];
      const permissions = key.permissions && key.permissions.length > 0 ? await permissionIds(key.permissions) : [];
      const identityId = key.externalId === undefined ? undefined : identityIds.get(key.externalId);
      records.push({
        native: imported.native,
        credits,
        record: {
          id: newId("key", now),
          workspaceId,
          apiId: api.id,
          keySpaceId: api.keySpaceId,
          hash: imported.hash,
          start: "",
          byteLength: IMPORTED_BYTE_LENGTH,
          enabled: key.enabled,
          permissionIds: permissions,
          roleIds: rolesOfKeys[index] as string[],
          ratelimits,
          createdAt: now,
          ...defined({
            name: key.name,
            identityId,
            meta: key.meta,
            expires: key.expires,
            pendingMigrationId: imported.native ? undefined : migration.id,
          }),
        },
      });
    }

    // CREATES_AT_ONCE keys at a time: on Redis each group is one pipeline (one round trip), not a round trip a key.
    const created: boolean[] = [];
    for (let start = 0; start < records.length; start += CREATES_AT_ONCE) {
      const group = records.slice(start, start + CREATES_AT_ONCE);
      created.push(...(await Promise.all(group.map(({ record, credits }) => this.deps.keys.create(record, credits)))));
    }
    // A native hash may be remembered as unknown by some instance (someone tried the key before it was imported).
    const announced = records.filter(({ native }, index) => native && created[index]).map(({ record }) => record.hash);
    if (announced.length > 0) await this.deps.invalidator.keysChanged(workspaceId, announced);
    const result: MigrateKeysResult = { migrated: [], failed: [] };
    input.keys.forEach((key, index) => {
      if (created[index]) result.migrated.push({ hash: key.hash, keyId: (records[index] as (typeof records)[number]).record.id });
      else result.failed.push(key.hash);
    });
    // One entry for the call, naming every key imported; never a hash (a secret of the other system).
    (this.deps.audit ?? UNAUDITED).record(caller, {
      action: "key.create",
      description: `Migrated ${result.migrated.length} keys into API ${api.id} (migration ${migration.id}, ${result.failed.length} failed)`,
      resources: [{ type: "api", id: api.id }, ...result.migrated.map(({ keyId }) => ({ type: "key", id: keyId }))],
      changes: [{ field: "migrationId", old: null, new: migration.id }],
    });
    return result;
  }

  /**
   * keys.verifyKey with a migration id, for a key its own hash did not find: looks the key up by the migration's
   * scheme and, when it is pending on that migration (and `mayVerify` allows its API), rewrites it to keygate's
   * hash and `start`. True when the key now verifies under keygate's hash.
   */
  async settle(workspaceId: string, migrationId: string, plaintext: string, mayVerify?: (apiId: string) => boolean): Promise<boolean> {
    const migration = this.declared.get(declaredKey(workspaceId, migrationId));
    const located = migration ? SCHEMES[migration.scheme].locate?.(plaintext) : undefined;
    if (!migration || !located) return false;
    const key = await this.deps.keys.findByHash(workspaceId, located.hash);
    if (!key || key.pendingMigrationId !== migration.id || key.deletedAt !== undefined) return false;
    if (mayVerify && !mayVerify(key.apiId)) return false;
    const hash = hashKey(plaintext);
    const moved = await this.deps.keys.completeMigration(workspaceId, key.id, migration.id, hash, located.start, this.deps.clock.now());
    // Not moved: a concurrent verification moved it first (then it verifies under `hash` all the same), or a
    // different key holds `hash` (then that key is what the plaintext verifies as).
    if (moved) await this.deps.invalidator.keyChanged(workspaceId, hash);
    return true;
  }
}

function declaredKey(workspaceId: string, migrationId: string): string {
  return `${workspaceId}\u0000${migrationId}`;
}

/**
 * Runs a check of one key of the request; the locations of its 400 (written from `body.` as for one key) are
 * moved under `body.keys[index]`.
 */
function atKey<T>(index: number, check: () => T): T {
  try {
    return check();
  } catch (error) {
    if (isKeygateError(error) && error.code === "err:unkey:application:invalid_input" && error.errors) {
      throw invalidInput(error.errors.map((issue) => ({ ...issue, location: issue.location.replace(/^body\./, `body.keys[${index}].`) })));
    }
    throw error;
  }
}

/** `resolve` called once per distinct list (order and repeats ignored). */
function memoised(resolve: (names: string[]) => Promise<string[]>): (names: string[]) => Promise<string[]> {
  const known = new Map<string, Promise<string[]>>();
  return (names) => {
    const distinct = [...new Set(names)].sort();
    const cacheKey = JSON.stringify(distinct);
    let resolved = known.get(cacheKey);
    if (!resolved) {
      resolved = resolve(distinct);
      known.set(cacheKey, resolved);
    }
    return resolved;
  };
}
