import { KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { defined } from "../../lib/defined.js";
import { hashKey } from "../../lib/hash.js";
import { newId } from "../../lib/ids.js";
import type { KeyStore } from "../../storage/interfaces.js";
import type { CreditRecord, KeyRecord } from "../../storage/records.js";
import type { ApiService } from "../apis/api-service.js";
import { type AuditTrail, created, UNAUDITED } from "../audit/audit-trail.js";
import type { Caller } from "../caller.js";
import { type CreditsInput, creditsForNewKey, withRefills } from "../credits.js";
import type { IdentityService } from "../identities/identity-service.js";
import type { CacheInvalidator } from "../invalidation.js";
import { checkMeta, MAX_KEY_META_BYTES } from "../meta.js";
import { type NamedLimitInput, replaceNamedLimits } from "../named-limits.js";
import type { NoticeSink } from "../notices.js";
import type { RbacService } from "../rbac/rbac-service.js";
import { requireApi } from "../root-keys/permissions.js";
import { postKeyNotice } from "./key-notices.js";
import type { KeySecrets } from "./key-secrets.js";
import type { LiveKeys } from "./live-keys.js";

// keys.createKey and keys.rerollKey: the two ways a new plaintext key comes to be (KeyService answers both).

export interface CreateKeyInput {
  apiId: string;
  prefix?: string;
  name?: string;
  byteLength: number;
  externalId?: string;
  meta?: Record<string, unknown>;
  roles?: string[];
  permissions?: string[];
  expires?: number;
  credits?: CreditsInput;
  ratelimits?: NamedLimitInput[];
  enabled: boolean;
  recoverable: boolean;
}

/** A new key: its id, and the plaintext, which is shown this once (and later only if it is recoverable). */
export interface IssuedKey {
  keyId: string;
  key: string;
}

export interface KeyIssuanceDeps {
  keys: KeyStore;
  live: LiveKeys;
  apis: ApiService;
  rbac: RbacService;
  identities: IdentityService;
  secrets: KeySecrets;
  invalidator: CacheInvalidator;
  clock: Clock;
  generateKey: (prefix: string | undefined, byteLength: number) => { key: string; start: string };
  audit?: AuditTrail;
  /** Told of keys created, updated and deleted (webhooks); nobody without one. */
  notices?: NoticeSink;
}

const MS_PER_MINUTE = 60_000;

export async function createKey(deps: KeyIssuanceDeps, caller: Caller, input: CreateKeyInput): Promise<IssuedKey> {
  caller.authorize(requireApi("create_key", input.apiId));
  if (input.recoverable) caller.authorize(requireApi("encrypt_key", input.apiId));
  const workspaceId = caller.workspaceId;
  const api = await deps.apis.findLive(workspaceId, input.apiId);
  if (input.recoverable) deps.secrets.require("store recoverable keys");
  checkMeta(input.meta, MAX_KEY_META_BYTES, "body.meta");
  const now = deps.clock.now();
  const ratelimits = replaceNamedLimits([], input.ratelimits ?? [], "body.ratelimits", now);
  const credits = creditsForNewKey(input.credits, now);
  const roles = await deps.rbac.existingRoles(workspaceId, input.roles ?? []);
  const permissions = await deps.rbac.permissionsForSlugs(workspaceId, input.permissions ?? [], null);
  const identity = input.externalId === undefined ? undefined : await deps.identities.findOrCreate(workspaceId, input.externalId);

  const id = newId("key", now);
  const { key, start } = deps.generateKey(input.prefix, input.byteLength);
  const record: KeyRecord = {
    id,
    workspaceId,
    apiId: api.id,
    keySpaceId: api.keySpaceId,
    hash: hashKey(key),
    start,
    byteLength: input.byteLength,
    enabled: input.enabled,
    permissionIds: permissions.map((p) => p.id),
    roleIds: roles.map((r) => r.id),
    ratelimits,
    createdAt: now,
    ...defined({
      prefix: input.prefix,
      name: input.name,
      identityId: identity?.id,
      meta: input.meta,
      expires: input.expires,
      encrypted: input.recoverable ? deps.secrets.encrypt(key, workspaceId, id) : undefined,
    }),
  };
  if (!(await deps.keys.create(record, credits))) throw idCollision();
  // An instance may remember this hash as unknown from an earlier attempt; it is known now.
  await deps.invalidator.keyChanged(workspaceId, record.hash);
  (deps.audit ?? UNAUDITED).record(caller, {
    action: "key.create",
    description: `Created key ${id} in API ${api.id}`,
    resources: [{ type: "key", id }, { type: "api", id: api.id }, ...(identity ? [{ type: "identity", id: identity.id }] : [])],
    // The wire's fields as given, never the key (nor its hash or start).
    changes: created({
      name: input.name,
      prefix: input.prefix,
      externalId: input.externalId,
      meta: input.meta,
      roles: input.roles,
      permissions: input.permissions,
      expires: input.expires,
      credits: input.credits,
      ratelimits: input.ratelimits,
      enabled: input.enabled,
      recoverable: input.recoverable,
    }),
  });
  await postKeyNotice(deps, "key.created", record, identity ?? null);
  return { keyId: id, key };
}

/**
 * A new key with the old one's settings (credits, identity, meta, expiry, key limits, roles, permissions,
 * recoverability). The old key expires `expiration` ms from now, rounded up to a whole minute (0: now), and
 * never later than it would have anyway.
 */
export async function rerollKey(deps: KeyIssuanceDeps, caller: Caller, input: { keyId: string; expiration: number }): Promise<IssuedKey> {
  const workspaceId = caller.workspaceId;
  const old = await deps.live.find(workspaceId, input.keyId);
  caller.authorize(requireApi("create_key", old.apiId));
  if (old.encrypted) {
    caller.authorize(requireApi("encrypt_key", old.apiId));
    deps.secrets.require("store recoverable keys");
  }
  const now = deps.clock.now();
  const id = newId("key", now);
  const { key, start } = deps.generateKey(old.prefix, old.byteLength);
  const { deletedAt: _deleted, updatedAt: _updated, pendingMigrationId: _pending, encrypted, ...kept } = old;
  const record: KeyRecord = {
    ...kept,
    id,
    hash: hashKey(key),
    start,
    ratelimits: old.ratelimits.map((limit) => ({ ...limit, id: newId("rl", now) })),
    ...defined({ encrypted: encrypted ? deps.secrets.encrypt(key, workspaceId, id) : undefined }),
    createdAt: now,
  };
  const oldCredits = await deps.keys.getCredits(workspaceId, old.id);
  const credits: CreditRecord | null = oldCredits ? withRefills(oldCredits, now) : null;
  if (!(await deps.keys.create(record, credits))) throw idCollision();

  const expiresAt = input.expiration === 0 ? now : Math.ceil((now + input.expiration) / MS_PER_MINUTE) * MS_PER_MINUTE;
  await deps.keys.update(workspaceId, old.id, (current) =>
    current.deletedAt !== undefined
      ? { result: undefined }
      : {
          key: { ...current, expires: Math.min(current.expires ?? Number.POSITIVE_INFINITY, expiresAt), updatedAt: now },
          result: undefined,
        },
  );
  await deps.invalidator.keyChanged(workspaceId, old.hash);
  await deps.invalidator.keyChanged(workspaceId, record.hash);
  (deps.audit ?? UNAUDITED).record(caller, {
    action: "key.reroll",
    description: `Rerolled key ${old.id} into key ${id}`,
    resources: [
      { type: "key", id: old.id },
      { type: "key", id },
      { type: "api", id: old.apiId },
    ],
    changes: [{ field: "expires", old: old.expires ?? null, new: Math.min(old.expires ?? Number.POSITIVE_INFINITY, expiresAt) }],
  });
  await postKeyNotice(deps, "key.created", record);
  return { keyId: id, key };
}

/** Two random ids (or hashes) met: practically impossible, and safe to retry. */
function idCollision(): KeygateError {
  return new KeygateError("err:unkey:application:unexpected_error", "A new key collided with an existing one. Try again.");
}
