import type { ApiStore } from "../interfaces.js";
import type { ApiRecord } from "../records.js";
import { Batch, readJson, updateJson } from "./atomic.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

export class RedisApiStore implements ApiStore {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.redis = redis;
    this.keys = keys;
  }

  async create(api: ApiRecord): Promise<boolean> {
    // The global id index lives in another slot than the workspace's records, so it is claimed first. It only
    // says which workspace to look in; the record decides whether the API exists. A claim left by an
    // interrupted create of the same workspace is reused.
    const indexKey = this.keys.apiWorkspace(api.id);
    const claimed =
      (await new Batch().absent(indexKey).set(indexKey, api.workspaceId).apply(this.redis)) ||
      (await this.redis.get(indexKey)) === api.workspaceId;
    if (!claimed) return false;
    const recordKey = this.keys.api(api.workspaceId, api.id);
    const keySpaceKey = this.keys.apiByKeySpace(api.workspaceId, api.keySpaceId);
    return new Batch()
      .absent(recordKey)
      .set(recordKey, JSON.stringify(api))
      .set(keySpaceKey, api.id)
      .zadd(this.keys.apiIds(api.workspaceId), api.id)
      .apply(this.redis);
  }

  async get(workspaceId: string, apiId: string): Promise<ApiRecord | null> {
    return (await readJson<ApiRecord>(this.redis, this.keys.api(workspaceId, apiId)))?.record ?? null;
  }

  async list(workspaceId: string): Promise<ApiRecord[]> {
    const ids = await this.redis.zrange(this.keys.apiIds(workspaceId), "0", "-1");
    if (ids.length === 0) return [];
    const raws = await this.redis.mget(ids.map((id) => this.keys.api(workspaceId, id)));
    return raws.filter((raw): raw is string => raw !== null).map((raw) => JSON.parse(raw) as ApiRecord);
  }

  async workspaceOf(apiId: string): Promise<string | null> {
    return this.redis.get(this.keys.apiWorkspace(apiId));
  }

  async findByKeySpace(workspaceId: string, keySpaceId: string): Promise<ApiRecord | null> {
    const apiId = await this.redis.get(this.keys.apiByKeySpace(workspaceId, keySpaceId));
    if (apiId === null) return null;
    const api = await this.get(workspaceId, apiId);
    // The index is written with the record, so a mismatch can only come from a hand-edited Redis.
    return api && api.keySpaceId === keySpaceId ? api : null;
  }

  async setIpAllowlist(workspaceId: string, apiId: string, ipAllowlist: readonly string[] | null): Promise<ApiRecord | null> {
    const key = this.keys.api(workspaceId, apiId);
    return updateJson<ApiRecord, ApiRecord | null>(this.redis, key, (current, batch) => {
      if (!current || current.deletedAt !== undefined) return null;
      const { ipAllowlist: _previous, ...rest } = current;
      const updated: ApiRecord = ipAllowlist === null ? rest : { ...rest, ipAllowlist: [...ipAllowlist] };
      batch.set(key, JSON.stringify(updated));
      return updated;
    });
  }

  async markDeleted(workspaceId: string, apiId: string, at: number): Promise<ApiRecord | null> {
    const key = this.keys.api(workspaceId, apiId);
    return updateJson<ApiRecord, ApiRecord | null>(this.redis, key, (current, batch) => {
      if (!current || current.deletedAt !== undefined) return null;
      const deleted = { ...current, deletedAt: at };
      batch.set(key, JSON.stringify(deleted));
      return deleted;
    });
  }
}
