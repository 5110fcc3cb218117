import type { EncryptedSecret } from "../../lib/vault.js";
import type { KeyRecord, RatelimitConfig } from "../records.js";

/**
 * A key's record in compact form, as the value of its field in its bucket (keys.ts: keyRecords): a JSON array of
 * what every key has, `[id, apiId, keySpaceId, createdAt]`, then an object of the fields a key may have, short
 * names, present only when one is set. Nothing the place already says is kept: not the workspace (the Redis key's
 * hash tag) nor the hash (the field). Every version of keygate that shares the Redis reads this form: a position
 * or name here is never reused for another meaning.
 */
type CompactKey = [id: string, apiId: string, keySpaceId: string, createdAt: number, more?: CompactFields];

interface CompactFields {
  /** start, when not "" */
  t?: string;
  /** prefix */
  p?: string;
  /** byteLength, when not 16 */
  b?: number;
  /** name */
  n?: string;
  /** identityId */
  x?: string;
  /** meta */
  m?: Record<string, unknown>;
  /** expires */
  e?: number;
  /** 1 when disabled */
  d?: 1;
  /** permissionIds, when any */
  P?: string[];
  /** roleIds, when any */
  R?: string[];
  /** ratelimits, when any: [id, name, limit, durationMs, autoApply 1 or 0] */
  L?: [string, string, number, number, 0 | 1][];
  /** encrypted */
  k?: EncryptedSecret;
  /** pendingMigrationId */
  g?: string;
  /** updatedAt */
  u?: number;
  /** deletedAt */
  z?: number;
}

const USUAL_BYTE_LENGTH = 16;

export function encodeKeyRecord(key: KeyRecord): string {
  const more: CompactFields = {};
  let any = false;
  const set = <F extends keyof CompactFields>(field: F, value: CompactFields[F]) => {
    more[field] = value;
    any = true;
  };
  if (key.start !== "") set("t", key.start);
  if (key.prefix !== undefined) set("p", key.prefix);
  if (key.byteLength !== USUAL_BYTE_LENGTH) set("b", key.byteLength);
  if (key.name !== undefined) set("n", key.name);
  if (key.identityId !== undefined) set("x", key.identityId);
  if (key.meta !== undefined) set("m", key.meta);
  if (key.expires !== undefined) set("e", key.expires);
  if (!key.enabled) set("d", 1);
  if (key.permissionIds.length > 0) set("P", key.permissionIds);
  if (key.roleIds.length > 0) set("R", key.roleIds);
  if (key.ratelimits.length > 0)
    set(
      "L",
      key.ratelimits.map((limit) => [limit.id, limit.name, limit.limit, limit.durationMs, limit.autoApply ? 1 : 0]),
    );
  if (key.encrypted !== undefined) set("k", key.encrypted);
  if (key.pendingMigrationId !== undefined) set("g", key.pendingMigrationId);
  if (key.updatedAt !== undefined) set("u", key.updatedAt);
  if (key.deletedAt !== undefined) set("z", key.deletedAt);
  const compact: CompactKey = [key.id, key.apiId, key.keySpaceId, key.createdAt];
  if (any) compact.push(more);
  return JSON.stringify(compact);
}

/** The record `encodeKeyRecord` made, in the workspace and under the hash its place says. */
export function decodeKeyRecord(text: string, workspaceId: string, hash: string): KeyRecord {
  const [id, apiId, keySpaceId, createdAt, more = NOTHING_MORE] = JSON.parse(text) as CompactKey;
  const key: KeyRecord = {
    id,
    workspaceId,
    apiId,
    keySpaceId,
    hash,
    start: more.t ?? "",
    byteLength: more.b ?? USUAL_BYTE_LENGTH,
    enabled: more.d !== 1,
    permissionIds: more.P ?? [],
    roleIds: more.R ?? [],
    ratelimits: more.L?.map(limitOf) ?? [],
    createdAt,
  };
  if (more.p !== undefined) key.prefix = more.p;
  if (more.n !== undefined) key.name = more.n;
  if (more.x !== undefined) key.identityId = more.x;
  if (more.m !== undefined) key.meta = more.m;
  if (more.e !== undefined) key.expires = more.e;
  if (more.k !== undefined) key.encrypted = more.k;
  if (more.g !== undefined) key.pendingMigrationId = more.g;
  if (more.u !== undefined) key.updatedAt = more.u;
  if (more.z !== undefined) key.deletedAt = more.z;
  return key;
}

const NOTHING_MORE: CompactFields = Object.freeze({});

function limitOf([id, name, limit, durationMs, autoApply]: [string, string, number, number, 0 | 1]): RatelimitConfig {
  return { id, name, limit, durationMs, autoApply: autoApply === 1 };
}

/**
 * The bucket of a key's record, by its hash: 4,096 per workspace. Records are longer than Redis keeps in a listpack
 * (hash-max-listpack-value, 64 bytes), so a bucket is a hash table however few it holds: fewer, fuller buckets
 * cost less (a million keys: about 245 in each).
 */
export function recordBucket(hash: string): string {
  return (fnv1a(hash) & 0xfff).toString(16).padStart(3, "0");
}

/**
 * The bucket of a key's hash, by its id: 65,536 per workspace, so that up to about 8 million keys a bucket stays
 * within the 128 entries Redis keeps in a listpack (hash-max-listpack-entries), a few bytes an entry.
 */
export function hashBucket(keyId: string): string {
  return (fnv1a(keyId) & 0xffff).toString(16).padStart(4, "0");
}

/**
 * FNV-1a (32 bits) over a text's UTF-16 code units. The buckets are part of the storage form every version shares:
 * test/storage/redis-key-form.test.ts pins them.
 */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}
