import { Cluster } from "ioredis";
import type { KeyChange, KeyStore, Page, PageRequest } from "../interfaces.js";
import type { CreditRecord, KeyRecord } from "../records.js";
import { Batch, readJson } from "./atomic.js";
import { decodeKeyRecord, encodeKeyRecord, hashBucket, recordBucket } from "./key-record.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

const MAX_ATTEMPTS = 50;
/** Redis keys each SCAN step of upgradeStorage looks at. */
const UPGRADE_SCAN_COUNT = 1_000;
/** Ids a listing page resolves at once while a filter skips records. */
const PAGE_CHUNK = 200;

/** A key as read, with what a compare-and-set needs: the exact text stored, and in which form. */
interface StoredKey {
  record: KeyRecord;
  raw: string;
  /** `compact`: in the buckets (key-record.ts); `earlier`: a JSON record and a hash → id key of their own. */
  form: "compact" | "earlier";
}

/**
 * A key is a compact record in the bucket of its hash (one HGET finds it by hash), its hash in the bucket of its
 * id, its credit balance a JSON record of its own (the verification script changes it without touching the key),
 * and sorted sets of live key ids per API and per API and identity. Keys written before the compact form (a JSON
 * record per key and a hash → id key) are still read (a round trip more, when the compact form has no such key),
 * and move to the compact form when written, or all at once with upgradeStorage (`keygate keys compact`).
 */
export class RedisKeyStore implements KeyStore {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.redis = redis;
    this.keys = keys;
  }

  async create(key: KeyRecord, credits: CreditRecord | null): Promise<boolean> {
    const batch = new Batch();
    this.claim(batch, key.workspaceId, key.hash);
    batch.fieldAbsent(this.hashesOf(key.workspaceId, key.id), key.id).absent(this.keys.key(key.workspaceId, key.id));
    this.write(batch, undefined, key);
    if (credits) batch.set(this.keys.keyCredits(key.workspaceId, key.id), JSON.stringify(credits));
    return batch.apply(this.redis);
  }

  async get(workspaceId: string, keyId: string): Promise<KeyRecord | null> {
    return (await this.read(workspaceId, keyId))?.record ?? null;
  }

  async findByHash(workspaceId: string, hash: string): Promise<KeyRecord | null> {
    return (await this.readByHash(workspaceId, hash))?.record ?? null;
  }

  async getCredits(workspaceId: string, keyId: string): Promise<CreditRecord | null> {
    return (await readJson<CreditRecord>(this.redis, this.keys.keyCredits(workspaceId, keyId)))?.record ?? null;
  }

  async getCreditsMany(workspaceId: string, keyIds: readonly string[]): Promise<Map<string, CreditRecord>> {
    const found = new Map<string, CreditRecord>();
    if (keyIds.length === 0) return found;
    const raws = await this.redis.mget(keyIds.map((id) => this.keys.keyCredits(workspaceId, id)));
    keyIds.forEach((id, i) => {
      const raw = raws[i];
      if (raw) found.set(id, JSON.parse(raw) as CreditRecord);
    });
    return found;
  }

  async update<R>(
    workspaceId: string,
    keyId: string,
    change: (key: KeyRecord, credits: CreditRecord | null) => KeyChange<R>,
  ): Promise<R | null> {
    const creditsKey = this.keys.keyCredits(workspaceId, keyId);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const [current, rawCredits] = await Promise.all([this.read(workspaceId, keyId), this.redis.get(creditsKey)]);
      if (!current) return null;
      const outcome = change(structuredClone(current.record), rawCredits ? (JSON.parse(rawCredits) as CreditRecord) : null);
      if (!outcome.key && outcome.credits === undefined) return outcome.result;
      // Guard the key record always, the balance only when this change writes it: verifications move the
      // balance all the time, and a change that does not touch it need not wait for them.
      const batch = this.guarded(current);
      if (outcome.key) {
        if (outcome.key.hash !== current.record.hash) this.claim(batch, workspaceId, outcome.key.hash);
        this.write(batch, current, outcome.key);
      }
      if (outcome.credits !== undefined) {
        if (rawCredits) batch.equals(creditsKey, rawCredits);
        else batch.absent(creditsKey);
        if (outcome.credits === null) batch.del(creditsKey);
        else batch.set(creditsKey, JSON.stringify(outcome.credits));
      }
      if (await batch.apply(this.redis)) return outcome.result;
    }
    throw new Error(`gave up updating key ${keyId}: other writers kept changing it`);
  }

  async refundCredits(workspaceId: string, keyId: string, amount: number, now: number): Promise<number | null> {
    const balance = await this.redis.keygateRefundCredits(1, this.keys.keyCredits(workspaceId, keyId), String(amount), String(now));
    return balance === "" ? null : Number(balance);
  }

  async completeMigration(
    workspaceId: string,
    keyId: string,
    migrationId: string,
    hash: string,
    start: string,
    at: number,
  ): Promise<KeyRecord | null> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const current = await this.read(workspaceId, keyId);
      if (!current || current.record.pendingMigrationId !== migrationId) return null;
      const { pendingMigrationId: _settled, ...rest } = current.record;
      const next: KeyRecord = { ...rest, hash, start, updatedAt: at };
      const batch = this.guarded(current);
      this.claim(batch, workspaceId, hash);
      this.write(batch, current, next);
      if (await batch.apply(this.redis)) return next;
      // Either the record changed under us (read it again) or another key holds the new hash (give up).
      if (await this.hashTaken(workspaceId, hash)) return null;
    }
    throw new Error(`gave up migrating key ${keyId}: other writers kept changing it`);
  }

  async list(workspaceId: string, apiId: string, page: PageRequest & { identityId?: string }): Promise<Page<KeyRecord>> {
    const index =
      page.identityId === undefined
        ? this.keys.liveKeysOfApi(workspaceId, apiId)
        : this.keys.liveKeysOfIdentity(workspaceId, apiId, page.identityId);
    const items: KeyRecord[] = [];
    let start = page.cursor === undefined ? "-" : `[${page.cursor}`;
    const chunk = Math.max(page.limit + 1, PAGE_CHUNK);
    for (;;) {
      const ids = await this.redis.zrange(index, start, "+", "BYLEX", "LIMIT", 0, chunk);
      if (ids.length === 0) return { items };
      // One round trip finds every id's hash, one more reads the records (keys in the earlier form: one more).
      const found = await Promise.all(ids.map((id) => this.read(workspaceId, id)));
      for (let i = 0; i < ids.length; i++) {
        const key = found[i];
        if (!key) continue;
        if (items.length === page.limit) return { items, nextCursor: ids[i] as string };
        items.push(key.record);
      }
      if (ids.length < chunk) return { items };
      start = `(${ids[ids.length - 1]}`;
    }
  }

  async remove(workspaceId: string, keyId: string): Promise<boolean> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const current = await this.read(workspaceId, keyId);
      if (!current) return false;
      const batch = this.guarded(current).del(this.keys.keyCredits(workspaceId, keyId));
      this.write(batch, current, undefined);
      if (await batch.apply(this.redis)) return true;
    }
    throw new Error(`gave up removing key ${keyId}: other writers kept changing it`);
  }

  async upgradeStorage(progress?: (moved: number) => void): Promise<number> {
    // Every earlier record of every workspace under this prefix: `<prefix>:{<workspace>}:key:<id>`.
    const prefix = this.keys.prefix.replace(/[*?[\]\\]/g, "\\$&");
    const pattern = `${prefix}:{*}:key:*`;
    const shape = /:\{([^}]*)\}:key:(.*)$/;
    const nodes = this.redis instanceof Cluster ? this.redis.nodes("master") : [this.redis];
    let moved = 0;
    for (const node of nodes) {
      let cursor = "0";
      do {
        const [next, found] = await node.scan(cursor, "MATCH", pattern, "COUNT", UPGRADE_SCAN_COUNT);
        cursor = next;
        // Each found key moves on its own, all of them at once: one round trip (auto-pipelining) for the reads, one for the writes.
        const results = await Promise.all(
          found.map((name) => {
            const [, workspaceId, keyId] = shape.exec(name.slice(this.keys.prefix.length)) ?? [];
            return workspaceId === undefined || keyId === undefined ? false : this.moveToCompact(workspaceId, keyId);
          }),
        );
        moved += results.filter(Boolean).length;
        progress?.(moved);
      } while (cursor !== "0");
    }
    return moved;
  }

  /** Writes a key kept in the earlier form in the compact one; false when it is not (or no longer) in the earlier form. */
  private async moveToCompact(workspaceId: string, keyId: string): Promise<boolean> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const current = await this.read(workspaceId, keyId);
      if (!current || current.form === "compact") return false;
      const batch = this.guarded(current);
      batch.fieldAbsent(this.recordsOf(workspaceId, current.record.hash), current.record.hash);
      this.write(batch, current, current.record);
      if (await batch.apply(this.redis)) return true;
    }
    throw new Error(`gave up moving key ${keyId} to the compact form: other writers kept changing it`);
  }

  /**
   * The key with this id in whichever form it is kept; null when absent. The compact form is asked first: the
   * earlier form costs a round trip more, only for keys not (yet) in the compact one.
   */
  private async read(workspaceId: string, keyId: string, retried = false): Promise<StoredKey | null> {
    const hash = await this.redis.hget(this.hashesOf(workspaceId, keyId), keyId);
    if (hash !== null) {
      const raw = await this.redis.hget(this.recordsOf(workspaceId, hash), hash);
      if (raw !== null) return { record: decodeKeyRecord(raw, workspaceId, hash), raw, form: "compact" };
      // The key was removed, or moved to another hash, between the two reads: read it as it is now, once.
      return retried ? null : this.read(workspaceId, keyId, true);
    }
    const earlier = await this.redis.get(this.keys.key(workspaceId, keyId));
    return earlier === null ? null : { record: JSON.parse(earlier) as KeyRecord, raw: earlier, form: "earlier" };
  }

  /** The key with this hash in whichever form it is kept (the compact one first); null when absent. */
  private async readByHash(workspaceId: string, hash: string): Promise<StoredKey | null> {
    const raw = await this.redis.hget(this.recordsOf(workspaceId, hash), hash);
    if (raw !== null) return { record: decodeKeyRecord(raw, workspaceId, hash), raw, form: "compact" };
    const earlierId = await this.redis.get(this.keys.keyIdByHash(workspaceId, hash));
    if (earlierId === null) return null;
    const earlier = await this.read(workspaceId, earlierId);
    return earlier && earlier.record.hash === hash ? earlier : null;
  }

  /** A batch that applies only while the key is still exactly as read. */
  private guarded(current: StoredKey): Batch {
    const { record, raw } = current;
    return current.form === "compact"
      ? new Batch().fieldEquals(this.recordsOf(record.workspaceId, record.hash), record.hash, raw)
      : new Batch().equals(this.keys.key(record.workspaceId, record.id), raw);
  }

  /** Checks, in `batch`, that no key of the workspace holds `hash`, in either form. */
  private claim(batch: Batch, workspaceId: string, hash: string): void {
    batch.fieldAbsent(this.recordsOf(workspaceId, hash), hash).absent(this.keys.keyIdByHash(workspaceId, hash));
  }

  private async hashTaken(workspaceId: string, hash: string): Promise<boolean> {
    const [compact, earlier] = await Promise.all([
      this.redis.hexists(this.recordsOf(workspaceId, hash), hash),
      this.redis.exists(this.keys.keyIdByHash(workspaceId, hash)),
    ]);
    return compact === 1 || earlier === 1;
  }

  /**
   * Adds to `batch` what takes a key from `before` to `after` (undefined: not there): the old places cleared, the
   * record written in compact form (a key written is always moved to it), and the listings changed.
   */
  private write(batch: Batch, before: StoredKey | undefined, after: KeyRecord | undefined): void {
    if (before) {
      const { record } = before;
      if (before.form === "earlier")
        batch.del(this.keys.key(record.workspaceId, record.id)).del(this.keys.keyIdByHash(record.workspaceId, record.hash));
      else {
        batch.hdel(this.recordsOf(record.workspaceId, record.hash), record.hash);
        if (!after) batch.hdel(this.hashesOf(record.workspaceId, record.id), record.id);
      }
    }
    if (after) {
      batch
        .hset(this.recordsOf(after.workspaceId, after.hash), after.hash, encodeKeyRecord(after))
        .hset(this.hashesOf(after.workspaceId, after.id), after.id, after.hash);
    }
    this.index(batch, before?.record, after);
  }

  /** Adds to `batch` the listing changes of a key going from `before` to `after` (undefined: not there). */
  private index(batch: Batch, before: KeyRecord | undefined, after: KeyRecord | undefined): void {
    const live = (key: KeyRecord | undefined): key is KeyRecord => key !== undefined && key.deletedAt === undefined;
    if (live(before)) {
      batch.zrem(this.keys.liveKeysOfApi(before.workspaceId, before.apiId), before.id);
      if (before.identityId) batch.zrem(this.keys.liveKeysOfIdentity(before.workspaceId, before.apiId, before.identityId), before.id);
    }
    if (live(after)) {
      batch.zadd(this.keys.liveKeysOfApi(after.workspaceId, after.apiId), after.id);
      if (after.identityId) batch.zadd(this.keys.liveKeysOfIdentity(after.workspaceId, after.apiId, after.identityId), after.id);
    }
  }

  private recordsOf(workspaceId: string, hash: string): string {
    return this.keys.keyRecords(workspaceId, recordBucket(hash));
  }

  private hashesOf(workspaceId: string, keyId: string): string {
    return this.keys.keyHashes(workspaceId, hashBucket(keyId));
  }
}
