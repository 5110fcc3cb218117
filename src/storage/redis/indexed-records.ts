import type { Page, PageRequest } from "../interfaces.js";
import { Batch, readJson, updateJson } from "./atomic.js";
import { readMany, readPage } from "./pages.js";
import type { RedisClient } from "./topology.js";

interface WorkspaceRecord {
  id: string;
  workspaceId: string;
}

/** Where one kind of record lives (built by keys.ts, all under the workspace's hash tag). */
export interface IndexedRecordKeys {
  record(workspaceId: string, id: string): string;
  /** unique value → id */
  unique(workspaceId: string, value: string): string;
  /** sorted set of the listed ids, for keyset pages */
  listed(workspaceId: string): string;
}

/**
 * Records of one kind per workspace as JSON, with one unique field and the ids listed for keyset pages: the shared
 * shape of the Redis permission, role and identity stores. Every change to a record and its indexes is one atomic
 * batch. A retired record stays readable by id but leaves the unique index and the listing.
 */
export class RedisIndexedRecords<T extends WorkspaceRecord> {
  private readonly redis: RedisClient;
  private readonly keys: IndexedRecordKeys;
  private readonly uniqueOf: (record: T) => string;
  private readonly retired: (record: T) => boolean;

  /** `retired` tells a record retire() has kept (e.g. a deleted identity) from a listed one. */
  constructor(redis: RedisClient, keys: IndexedRecordKeys, uniqueOf: (record: T) => string, retired: (record: T) => boolean = () => false) {
    this.redis = redis;
    this.keys = keys;
    this.uniqueOf = uniqueOf;
    this.retired = retired;
  }

  /** False (nothing written) when the id or the unique value is taken in the workspace. `also` adds writes of its own. */
  create(record: T, also?: (batch: Batch) => void): Promise<boolean> {
    const { workspaceId, id } = record;
    const batch = new Batch()
      .absent(this.keys.unique(workspaceId, this.uniqueOf(record)))
      .absent(this.keys.record(workspaceId, id))
      .set(this.keys.record(workspaceId, id), JSON.stringify(record))
      .set(this.keys.unique(workspaceId, this.uniqueOf(record)), id)
      .zadd(this.keys.listed(workspaceId), id);
    also?.(batch);
    return batch.apply(this.redis);
  }

  async get(workspaceId: string, id: string): Promise<T | null> {
    return (await readJson<T>(this.redis, this.keys.record(workspaceId, id)))?.record ?? null;
  }

  async findByUnique(workspaceId: string, value: string): Promise<T | null> {
    const id = await this.redis.get(this.keys.unique(workspaceId, value));
    return id === null ? null : this.get(workspaceId, id);
  }

  /** Ids of several unique values, in order (null where there is none). */
  idsByUnique(workspaceId: string, values: readonly string[]): Promise<(string | null)[]> {
    return values.length === 0 ? Promise.resolve([]) : this.redis.mget(values.map((value) => this.keys.unique(workspaceId, value)));
  }

  getMany(workspaceId: string, ids: readonly string[]): Promise<T[]> {
    return readMany<T>(
      this.redis,
      ids.map((id) => this.keys.record(workspaceId, id)),
    );
  }

  list(workspaceId: string, page: PageRequest, accept?: (record: T) => boolean): Promise<Page<T>> {
    return readPage<T>(this.redis, this.keys.listed(workspaceId), (id) => this.keys.record(workspaceId, id), page, accept);
  }

  /** Replaces a listed record (its unique value must not change); null when absent or retired. */
  replace(workspaceId: string, id: string, change: (current: T) => T): Promise<T | null> {
    const key = this.keys.record(workspaceId, id);
    return updateJson<T, T | null>(this.redis, key, (current, batch) => {
      if (!current || this.retired(current)) return null;
      const next = change(structuredClone(current));
      batch.set(key, JSON.stringify(next));
      return next;
    });
  }

  /** Deletes a record and its indexes; false when absent. */
  async remove(workspaceId: string, id: string): Promise<boolean> {
    const current = await readJson<T>(this.redis, this.keys.record(workspaceId, id));
    if (!current) return false;
    return new Batch()
      .equals(this.keys.record(workspaceId, id), current.raw)
      .del(this.keys.record(workspaceId, id))
      .del(this.keys.unique(workspaceId, this.uniqueOf(current.record)))
      .zrem(this.keys.listed(workspaceId), id)
      .apply(this.redis);
  }

  /**
   * Keeps the record as `change` makes it (retired) but drops it from the unique index and the listing; false when
   * absent or retired. `also` adds writes of its own to the same atomic batch.
   */
  retire(workspaceId: string, id: string, change: (current: T) => T, also?: (batch: Batch) => void): Promise<boolean> {
    const key = this.keys.record(workspaceId, id);
    return updateJson<T, boolean>(this.redis, key, (current, batch) => {
      if (!current || this.retired(current)) return false;
      batch
        .set(key, JSON.stringify(change(current)))
        .del(this.keys.unique(workspaceId, this.uniqueOf(current)))
        .zrem(this.keys.listed(workspaceId), id);
      also?.(batch);
      return true;
    });
  }
}
