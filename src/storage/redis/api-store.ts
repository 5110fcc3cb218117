import { Cluster } from "ioredis";
import type { ApiStore } from "../interfaces.js";
import type { ApiRecord } from "../records.js";
import { Batch, readJson, updateJson } from "./atomic.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

export class RedisApiStore implements ApiStore {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;
  /** Workspaces whose APIs are all in the id index (see indexEarlierApis). */
  private readonly indexed = new Set<string>();

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
    await this.indexEarlierApis(workspaceId);
    const ids = await this.redis.zrange(this.keys.apiIds(workspaceId), "0", "-1");
    if (ids.length === 0) return [];
    const raws = await this.redis.mget(ids.map((id) => this.keys.api(workspaceId, id)));
    return raws.filter((raw): raw is string => raw !== null).map((raw) => JSON.parse(raw) as ApiRecord);
  }

  /**
   * APIs created before keygate kept the per-workspace id index (the dashboard's release) are added to it once per
   * workspace: their records are found by a scan of every primary, then a marker says the index is whole. Creates
   * write the index themselves, so the scan never has to run again.
   */
  private async indexEarlierApis(workspaceId: string): Promise<void> {
    if (this.indexed.has(workspaceId)) return;
    const marker = this.keys.apiIdsWhole(workspaceId);
    if ((await this.redis.exists(marker)) === 0) {
      const recordPrefix = this.keys.api(workspaceId, "");
      const pattern = `${recordPrefix.replace(/[*?[\]\\]/g, "\\$&")}*`;
      const nodes = this.redis instanceof Cluster ? this.redis.nodes("master") : [this.redis];
      const ids = new Set<string>();
      for (const node of nodes) {
        let cursor = "0";
        do {
          const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", 1000);
          cursor = next;
          for (const key of keys) ids.add(key.slice(recordPrefix.length));
        } while (cursor !== "0");
      }
      const batch = new Batch();
      for (const id of ids) batch.zadd(this.keys.apiIds(workspaceId), id);
      await batch.set(marker, "1").apply(this.redis);
    }
    this.indexed.add(workspaceId);
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
