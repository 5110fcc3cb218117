import type { RootKeyStore } from "../interfaces.js";
import type { RootKeyRecord } from "../records.js";
import { Batch, readJson, updateJson } from "./atomic.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

/** Root keys live under the `{rootkeys}` tag: the record by hash, an id→hash index and the sorted id list. */
export class RedisRootKeyStore implements RootKeyStore {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.redis = redis;
    this.keys = keys;
  }

  async findByHash(hash: string): Promise<RootKeyRecord | null> {
    return (await readJson<RootKeyRecord>(this.redis, this.keys.rootKeyByHash(hash)))?.record ?? null;
  }

  async create(record: RootKeyRecord): Promise<boolean> {
    return new Batch()
      .absent(this.keys.rootKeyByHash(record.hash))
      .absent(this.keys.rootKeyHashById(record.id))
      .set(this.keys.rootKeyByHash(record.hash), JSON.stringify(record))
      .set(this.keys.rootKeyHashById(record.id), record.hash)
      .zadd(this.keys.rootKeyIds(), record.id)
      .apply(this.redis);
  }

  async list(workspaceId?: string): Promise<RootKeyRecord[]> {
    const ids = await this.redis.zrange(this.keys.rootKeyIds(), "0", "-1");
    if (ids.length === 0) return [];
    const hashes = await this.redis.mget(ids.map((id) => this.keys.rootKeyHashById(id)));
    const present = hashes.filter((hash): hash is string => hash !== null);
    if (present.length === 0) return [];
    const raws = await this.redis.mget(present.map((hash) => this.keys.rootKeyByHash(hash)));
    return raws
      .filter((raw): raw is string => raw !== null)
      .map((raw) => JSON.parse(raw) as RootKeyRecord)
      .filter((record) => workspaceId === undefined || record.workspaceId === workspaceId);
  }

  async revoke(id: string, at: number): Promise<RootKeyRecord | null> {
    const hash = await this.redis.get(this.keys.rootKeyHashById(id));
    if (hash === null) return null;
    return updateJson<RootKeyRecord, RootKeyRecord | null>(this.redis, this.keys.rootKeyByHash(hash), (current, batch) => {
      if (!current || current.revokedAt !== undefined) return null;
      const revoked = { ...current, revokedAt: at };
      batch.set(this.keys.rootKeyByHash(hash), JSON.stringify(revoked));
      return revoked;
    });
  }
}
