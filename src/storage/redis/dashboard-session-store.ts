import type { DashboardSessionStore } from "../interfaces.js";
import type { DashboardSessionRecord } from "../records.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

/** One JSON value per session with Redis's own expiry; every operation touches one key. */
export class RedisDashboardSessionStore implements DashboardSessionStore {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.redis = redis;
    this.keys = keys;
  }

  async create(session: DashboardSessionRecord, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(this.keys.dashboardSession(session.id), JSON.stringify(session), "PX", ttlMs, "NX")) === "OK";
  }

  async get(id: string): Promise<DashboardSessionRecord | null> {
    const raw = await this.redis.get(this.keys.dashboardSession(id));
    return raw === null ? null : (JSON.parse(raw) as DashboardSessionRecord);
  }

  async touch(id: string, lastSeenAt: number, ttlMs: number): Promise<void> {
    const current = await this.get(id);
    if (!current) return;
    // XX: a session deleted between the read and this write stays deleted.
    await this.redis.set(this.keys.dashboardSession(id), JSON.stringify({ ...current, lastSeenAt }), "PX", ttlMs, "XX");
  }

  async delete(id: string): Promise<void> {
    await this.redis.del(this.keys.dashboardSession(id));
  }
}
