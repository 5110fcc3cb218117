import type { PortalChange, PortalSessionStore, PortalStore } from "../portal-interfaces.js";
import type { PortalCodeRecord, PortalRecord, PortalSessionRecord } from "../portal-records.js";
import { Batch, readJson } from "./atomic.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

/** Every portal as one JSON value under the `{portals}` tag, changed by compare-and-set on the value read. */
export class RedisPortalStore implements PortalStore {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.redis = redis;
    this.keys = keys;
  }

  async all(): Promise<PortalRecord[]> {
    return (await readJson<PortalRecord[]>(this.redis, this.keys.portals()))?.record ?? [];
  }

  async update<R>(change: (current: PortalRecord[]) => PortalChange<R>, maxAttempts = 50): Promise<R> {
    const key = this.keys.portals();
    for (let attempt = 0; attempt < maxAttempts; attempt++) {
      const read = await readJson<PortalRecord[]>(this.redis, key);
      const next = change(read?.record ?? []);
      if (next.portals === undefined) return next.result;
      const batch = new Batch();
      if (read) batch.equals(key, read.raw);
      else batch.absent(key);
      batch.set(key, JSON.stringify(next.portals));
      if (await batch.apply(this.redis)) return next.result;
    }
    throw new Error("gave up changing the portals: other writers kept changing them");
  }
}

/** A JSON value per code and per session with Redis's own expiry; a code's redemption is a SET NX beside it. */
export class RedisPortalSessionStore implements PortalSessionStore {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.redis = redis;
    this.keys = keys;
  }

  async createCode(code: PortalCodeRecord, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(this.keys.portalCode(code.hash), JSON.stringify(code), "PX", ttlMs, "NX")) === "OK";
  }

  async redeemCode(hash: string): Promise<{ code: PortalCodeRecord; first: boolean } | null> {
    const raw = await this.redis.get(this.keys.portalCode(hash));
    if (raw === null) return null;
    const code = JSON.parse(raw) as PortalCodeRecord;
    // The marker outlives the code's own expiry at most by the time between these two commands.
    const ttlMs = Math.max(1, code.expiresAt - code.createdAt);
    const first = (await this.redis.set(this.keys.portalCodeRedeemed(hash), "1", "PX", ttlMs, "NX")) === "OK";
    return { code, first };
  }

  async createSession(session: PortalSessionRecord, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(this.keys.portalSession(session.hash), JSON.stringify(session), "PX", ttlMs, "NX")) === "OK";
  }

  async getSession(hash: string): Promise<PortalSessionRecord | null> {
    const raw = await this.redis.get(this.keys.portalSession(hash));
    return raw === null ? null : (JSON.parse(raw) as PortalSessionRecord);
  }

  async deleteSession(hash: string): Promise<void> {
    await this.redis.del(this.keys.portalSession(hash));
  }
}
