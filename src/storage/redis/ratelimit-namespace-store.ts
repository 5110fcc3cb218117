import { randomUUID } from "node:crypto";
import type { RatelimitNamespaceStore } from "../interfaces.js";
import type { RatelimitNamespaceRecord, RatelimitOverrideRecord } from "../records.js";
import { Batch, readJson, updateJson } from "./atomic.js";
import type { RedisGuard } from "./guard.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

/** Optimistic writes retry this often when other writers keep changing the same override. */
const MAX_ATTEMPTS = 50;

/**
 * Namespaces and overrides, all under the workspace's hash tag:
 *   rlns:<id>                      the namespace record (JSON)
 *   rlns-name:<name>               its id, by name        rlns-ids   sorted set of the workspace's namespace ids
 *   rlor:<nsId>:<overrideId>       an override (JSON)
 *   rlor-ident:<nsId>:<identifier> its id, by identifier  rlor-ids:<nsId>  sorted set of the override ids
 *   rlor-version:<nsId>            a token replaced by every override write, for cheap cache revalidation
 * Every call runs behind the connection's circuit breaker.
 */
export class RedisRatelimitNamespaceStore implements RatelimitNamespaceStore {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;
  private readonly guard: RedisGuard;

  constructor(redis: RedisClient, keys: RedisKeys, guard: RedisGuard) {
    this.redis = redis;
    this.keys = keys;
    this.guard = guard;
  }

  createNamespace(namespace: RatelimitNamespaceRecord): Promise<boolean> {
    const { workspaceId, id, name } = namespace;
    return this.guard.run("namespaces", () =>
      new Batch()
        .absent(this.keys.ratelimitNamespace(workspaceId, id))
        .absent(this.keys.ratelimitNamespaceByName(workspaceId, name))
        .set(this.keys.ratelimitNamespace(workspaceId, id), JSON.stringify(namespace))
        .set(this.keys.ratelimitNamespaceByName(workspaceId, name), id)
        .zadd(this.keys.ratelimitNamespaceIds(workspaceId), id)
        .apply(this.redis),
    );
  }

  getNamespace(workspaceId: string, namespaceId: string): Promise<RatelimitNamespaceRecord | null> {
    return this.guard.run(
      "namespaces",
      async () =>
        (await readJson<RatelimitNamespaceRecord>(this.redis, this.keys.ratelimitNamespace(workspaceId, namespaceId)))?.record ?? null,
    );
  }

  findNamespaceByName(workspaceId: string, name: string): Promise<RatelimitNamespaceRecord | null> {
    return this.guard.run("namespaces", async () => {
      const id = await this.redis.get(this.keys.ratelimitNamespaceByName(workspaceId, name));
      if (id === null) return null;
      return (await readJson<RatelimitNamespaceRecord>(this.redis, this.keys.ratelimitNamespace(workspaceId, id)))?.record ?? null;
    });
  }

  listNamespaces(workspaceId: string): Promise<RatelimitNamespaceRecord[]> {
    return this.guard.run("namespaces", async () => {
      const ids = await this.redis.zrange(this.keys.ratelimitNamespaceIds(workspaceId), "0", "-1");
      return this.readRecords<RatelimitNamespaceRecord>(ids.map((id) => this.keys.ratelimitNamespace(workspaceId, id)));
    });
  }

  markNamespaceDeleted(workspaceId: string, namespaceId: string, at: number): Promise<RatelimitNamespaceRecord | null> {
    const key = this.keys.ratelimitNamespace(workspaceId, namespaceId);
    return this.guard.run("namespaces", () =>
      updateJson<RatelimitNamespaceRecord, RatelimitNamespaceRecord | null>(this.redis, key, (current, batch) => {
        if (!current || current.deletedAt !== undefined) return null;
        const deleted = { ...current, deletedAt: at };
        batch.set(key, JSON.stringify(deleted));
        return deleted;
      }),
    );
  }

  namespaceState(
    workspaceId: string,
    namespaceId: string,
  ): Promise<{ namespace: RatelimitNamespaceRecord; overridesVersion: string } | null> {
    return this.guard.run("namespaces", async () => {
      const [raw, version] = await this.redis.mget(
        this.keys.ratelimitNamespace(workspaceId, namespaceId),
        this.keys.ratelimitOverridesVersion(workspaceId, namespaceId),
      );
      if (raw === null || raw === undefined) return null;
      return { namespace: JSON.parse(raw) as RatelimitNamespaceRecord, overridesVersion: version ?? "" };
    });
  }

  setOverride(override: RatelimitOverrideRecord): Promise<RatelimitOverrideRecord> {
    const { workspaceId, namespaceId, identifier } = override;
    const identKey = this.keys.ratelimitOverrideByIdentifier(workspaceId, namespaceId, identifier);
    return this.guard.run("namespaces", async () => {
      for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        const batch = new Batch().set(this.keys.ratelimitOverridesVersion(workspaceId, namespaceId), randomUUID());
        const existingId = await this.redis.get(identKey);
        let stored: RatelimitOverrideRecord;
        if (existingId === null) {
          stored = override;
          batch
            .absent(identKey)
            .set(identKey, override.id)
            .zadd(this.keys.ratelimitOverrideIds(workspaceId, namespaceId), override.id)
            .set(this.keys.ratelimitOverride(workspaceId, namespaceId, override.id), JSON.stringify(override));
        } else {
          const recordKey = this.keys.ratelimitOverride(workspaceId, namespaceId, existingId);
          const current = await readJson<RatelimitOverrideRecord>(this.redis, recordKey);
          if (!current) continue; // deleted between the two reads: start again
          stored = { ...current.record, limit: override.limit, durationMs: override.durationMs };
          batch.equals(identKey, existingId).equals(recordKey, current.raw).set(recordKey, JSON.stringify(stored));
        }
        if (await batch.apply(this.redis)) return stored;
      }
      throw new Error(`gave up setting override '${identifier}': other writers kept changing it`);
    });
  }

  getOverride(workspaceId: string, namespaceId: string, identifier: string): Promise<RatelimitOverrideRecord | null> {
    return this.guard.run("namespaces", async () => {
      const id = await this.redis.get(this.keys.ratelimitOverrideByIdentifier(workspaceId, namespaceId, identifier));
      if (id === null) return null;
      return (
        (await readJson<RatelimitOverrideRecord>(this.redis, this.keys.ratelimitOverride(workspaceId, namespaceId, id)))?.record ?? null
      );
    });
  }

  deleteOverride(workspaceId: string, namespaceId: string, identifier: string): Promise<RatelimitOverrideRecord | null> {
    const identKey = this.keys.ratelimitOverrideByIdentifier(workspaceId, namespaceId, identifier);
    return this.guard.run("namespaces", async () => {
      for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        const id = await this.redis.get(identKey);
        if (id === null) return null;
        const recordKey = this.keys.ratelimitOverride(workspaceId, namespaceId, id);
        const current = await readJson<RatelimitOverrideRecord>(this.redis, recordKey);
        if (!current) continue;
        const applied = await new Batch()
          .equals(identKey, id)
          .equals(recordKey, current.raw)
          .del(identKey)
          .del(recordKey)
          .zrem(this.keys.ratelimitOverrideIds(workspaceId, namespaceId), id)
          .set(this.keys.ratelimitOverridesVersion(workspaceId, namespaceId), randomUUID())
          .apply(this.redis);
        if (applied) return current.record;
      }
      throw new Error(`gave up deleting override '${identifier}': other writers kept changing it`);
    });
  }

  listOverrides(workspaceId: string, namespaceId: string, page: { cursor?: string; limit: number }): Promise<RatelimitOverrideRecord[]> {
    return this.guard.run("namespaces", async () => {
      // Members all have score 0, so the set is ordered by id bytewise and ZRANGEBYLEX gives a keyset page.
      const ids = await this.redis.zrangebylex(
        this.keys.ratelimitOverrideIds(workspaceId, namespaceId),
        page.cursor === undefined ? "-" : `[${page.cursor}`,
        "+",
        "LIMIT",
        0,
        page.limit,
      );
      return this.readRecords<RatelimitOverrideRecord>(ids.map((id) => this.keys.ratelimitOverride(workspaceId, namespaceId, id)));
    });
  }

  allOverrides(workspaceId: string, namespaceId: string): Promise<RatelimitOverrideRecord[]> {
    return this.guard.run("namespaces", async () => {
      const ids = await this.redis.zrange(this.keys.ratelimitOverrideIds(workspaceId, namespaceId), "0", "-1");
      return this.readRecords<RatelimitOverrideRecord>(ids.map((id) => this.keys.ratelimitOverride(workspaceId, namespaceId, id)));
    });
  }

  /** The JSON records at these keys, in order, skipping any deleted since their ids were read. */
  private async readRecords<T>(keys: string[]): Promise<T[]> {
    if (keys.length === 0) return [];
    const raws = await this.redis.mget(keys);
    return raws.filter((raw): raw is string => raw !== null).map((raw) => JSON.parse(raw) as T);
  }
}
