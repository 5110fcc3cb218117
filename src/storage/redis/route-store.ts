import type { RouteStore, RouteTableChange, StoredRouteTable } from "../route-interfaces.js";
import { Batch, readJson } from "./atomic.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

/** The table before the first write: a new object each time, as every table read is the caller's own to change. */
function emptyTable(): StoredRouteTable {
  return { version: 0, routes: [] };
}

/**
 * The route table as one JSON value, its version as another and each OpenAPI document as its own key, all under the
 * `{routes}` hash tag: a change writes them in one step, guarded by a compare-and-set on the table read before.
 */
export class RedisRouteStore implements RouteStore {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.redis = redis;
    this.keys = keys;
  }

  async table(): Promise<StoredRouteTable> {
    return (await readJson<StoredRouteTable>(this.redis, this.keys.routeTable()))?.record ?? emptyTable();
  }

  async version(): Promise<number> {
    return Number((await this.redis.get(this.keys.routeTableVersion())) ?? 0);
  }

  async update<R>(change: (current: StoredRouteTable) => RouteTableChange<R>, maxAttempts = 50): Promise<R> {
    const key = this.keys.routeTable();
    for (let attempt = 0; attempt < maxAttempts; attempt++) {
      const read = await readJson<StoredRouteTable>(this.redis, key);
      const current = read?.record ?? emptyTable();
      const next = change(structuredClone(current));
      if (next.routes === undefined) return next.result;
      const version = current.version + 1;
      const batch = new Batch();
      if (read) batch.equals(key, read.raw);
      else batch.absent(key);
      batch.set(key, JSON.stringify({ version, routes: next.routes })).set(this.keys.routeTableVersion(), String(version));
      const kept = new Set(next.routes.map((route) => route.id));
      for (const route of current.routes) if (!kept.has(route.id)) batch.del(this.keys.routeOpenApi(route.id));
      if (next.openApi) {
        const documentKey = this.keys.routeOpenApi(next.openApi.routeId);
        if (next.openApi.text === null) batch.del(documentKey);
        else batch.set(documentKey, next.openApi.text);
      }
      if (await batch.apply(this.redis)) return next.result;
    }
    throw new Error("gave up changing the route table: other writers kept changing it");
  }

  openApi(routeId: string): Promise<string | null> {
    return this.redis.get(this.keys.routeOpenApi(routeId));
  }
}
