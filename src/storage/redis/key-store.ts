import type { KeyChange, KeyStore, Page, PageRequest } from "../interfaces.js";
import type { CreditRecord, KeyRecord } from "../records.js";
import { Batch, readJson } from "./atomic.js";
import type { RedisKeys } from "./keys.js";
import { readPage } from "./pages.js";
import type { RedisClient } from "./topology.js";

const MAX_ATTEMPTS = 50;

/**
 * A key is a JSON record, its credit balance a second JSON record (the verification script changes it without
 * touching the key), an index from hash to id, and sorted sets of live key ids per API and per API and identity.
 */
export class RedisKeyStore implements KeyStore {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.redis = redis;
    this.keys = keys;
  }

  async create(key: KeyRecord, credits: CreditRecord | null): Promise<boolean> {
    const batch = new Batch()
      .absent(this.keys.key(key.workspaceId, key.id))
      .absent(this.keys.keyIdByHash(key.workspaceId, key.hash))
      .set(this.keys.key(key.workspaceId, key.id), JSON.stringify(key))
      .set(this.keys.keyIdByHash(key.workspaceId, key.hash), key.id);
    if (credits) batch.set(this.keys.keyCredits(key.workspaceId, key.id), JSON.stringify(credits));
    this.index(batch, undefined, key);
    return batch.apply(this.redis);
  }

  async get(workspaceId: string, keyId: string): Promise<KeyRecord | null> {
    return (await readJson<KeyRecord>(this.redis, this.keys.key(workspaceId, keyId)))?.record ?? null;
  }

  async findByHash(workspaceId: string, hash: string): Promise<KeyRecord | null> {
    const id = await this.redis.get(this.keys.keyIdByHash(workspaceId, hash));
    return id === null ? null : this.get(workspaceId, id);
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
    const keyKey = this.keys.key(workspaceId, keyId);
    const creditsKey = this.keys.keyCredits(workspaceId, keyId);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const [rawKey, rawCredits] = await this.redis.mget(keyKey, creditsKey);
      if (!rawKey) return null;
      const current = JSON.parse(rawKey) as KeyRecord;
      const outcome = change(structuredClone(current), rawCredits ? (JSON.parse(rawCredits) as CreditRecord) : null);
      if (!outcome.key && outcome.credits === undefined) return outcome.result;
      // Guard the key record always, the balance only when this change writes it: verifications move the
      // balance all the time, and a change that does not touch it need not wait for them.
      const batch = new Batch().equals(keyKey, rawKey);
      if (outcome.key) {
        batch.set(keyKey, JSON.stringify(outcome.key));
        this.index(batch, current, outcome.key);
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
    const keyKey = this.keys.key(workspaceId, keyId);
    const newHashKey = this.keys.keyIdByHash(workspaceId, hash);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const current = await readJson<KeyRecord>(this.redis, keyKey);
      if (!current || current.record.pendingMigrationId !== migrationId) return null;
      const { pendingMigrationId: _settled, ...rest } = current.record;
      const next: KeyRecord = { ...rest, hash, start, updatedAt: at };
      const applied = await new Batch()
        .equals(keyKey, current.raw)
        .absent(newHashKey)
        .set(keyKey, JSON.stringify(next))
        .del(this.keys.keyIdByHash(workspaceId, current.record.hash))
        .set(newHashKey, keyId)
        .apply(this.redis);
      if (applied) return next;
      // Either the record changed under us (read it again) or another key holds the new hash (give up).
      if ((await this.redis.exists(newHashKey)) === 1) return null;
    }
    throw new Error(`gave up migrating key ${keyId}: other writers kept changing it`);
  }

  async list(workspaceId: string, apiId: string, page: PageRequest & { identityId?: string }): Promise<Page<KeyRecord>> {
    const index =
      page.identityId === undefined
        ? this.keys.liveKeysOfApi(workspaceId, apiId)
        : this.keys.liveKeysOfIdentity(workspaceId, apiId, page.identityId);
    return readPage<KeyRecord>(this.redis, index, (id) => this.keys.key(workspaceId, id), page);
  }

  async remove(workspaceId: string, keyId: string): Promise<boolean> {
    const keyKey = this.keys.key(workspaceId, keyId);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const current = await readJson<KeyRecord>(this.redis, keyKey);
      if (!current) return false;
      const batch = new Batch()
        .equals(keyKey, current.raw)
        .del(keyKey)
        .del(this.keys.keyCredits(workspaceId, keyId))
        .del(this.keys.keyIdByHash(workspaceId, current.record.hash));
      this.index(batch, current.record, undefined);
      if (await batch.apply(this.redis)) return true;
    }
    throw new Error(`gave up removing key ${keyId}: other writers kept changing it`);
  }

  /** Adds to `batch` the index changes of a key going from `before` to `after` (undefined: not there). */
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
}
