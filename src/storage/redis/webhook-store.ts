import type { WebhookStore } from "../webhook-interfaces.js";
import type { WebhookDeliveryRecord, WebhookEndpointRecord } from "../webhook-records.js";
import { Batch, readJson, updateJson } from "./atomic.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

/** How long a delivery's record outlives its last write: the log is for looking into recent trouble. */
const DELIVERY_TTL_MS = 30 * 24 * 3_600_000;

/** Endpoints as JSON under the workspace's tag with a sorted id index; deliveries likewise, logged per endpoint. */
export class RedisWebhookStore implements WebhookStore {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.redis = redis;
    this.keys = keys;
  }

  async create(record: WebhookEndpointRecord): Promise<boolean> {
    const created = await new Batch()
      .absent(this.keys.webhook(record.workspaceId, record.id))
      .set(this.keys.webhook(record.workspaceId, record.id), JSON.stringify(record))
      .zadd(this.keys.webhookIds(record.workspaceId), record.id)
      .apply(this.redis);
    // Another slot than the record's: a hint for the expiring-key scan, written after.
    if (created) await this.redis.sadd(this.keys.webhookWorkspaces(), record.workspaceId);
    return created;
  }

  async get(workspaceId: string, id: string): Promise<WebhookEndpointRecord | null> {
    return (await readJson<WebhookEndpointRecord>(this.redis, this.keys.webhook(workspaceId, id)))?.record ?? null;
  }

  async list(workspaceId: string): Promise<WebhookEndpointRecord[]> {
    const ids = await this.redis.zrange(this.keys.webhookIds(workspaceId), "0", "-1");
    if (ids.length === 0) return [];
    const raws = await this.redis.mget(ids.map((id) => this.keys.webhook(workspaceId, id)));
    return raws.filter((raw): raw is string => raw !== null).map((raw) => JSON.parse(raw) as WebhookEndpointRecord);
  }

  async workspaces(): Promise<string[]> {
    return (await this.redis.smembers(this.keys.webhookWorkspaces())).sort();
  }

  update(
    workspaceId: string,
    id: string,
    change: (current: WebhookEndpointRecord) => WebhookEndpointRecord | null,
  ): Promise<WebhookEndpointRecord | null> {
    const key = this.keys.webhook(workspaceId, id);
    return updateJson<WebhookEndpointRecord, WebhookEndpointRecord | null>(this.redis, key, (current, batch) => {
      const next = current ? change(current) : null;
      if (next) batch.set(key, JSON.stringify(next));
      return next;
    });
  }

  async delete(workspaceId: string, id: string): Promise<boolean> {
    const deleted = await new Batch()
      .present(this.keys.webhook(workspaceId, id))
      .del(this.keys.webhook(workspaceId, id))
      .zrem(this.keys.webhookIds(workspaceId), id)
      .apply(this.redis);
    if (!deleted) return false;
    const log = this.keys.webhookLog(workspaceId, id);
    const deliveries = await this.redis.zrange(log, "0", "-1");
    await this.redis.del(log, ...deliveries.map((delivery) => this.keys.webhookDelivery(workspaceId, delivery)));
    if ((await this.redis.zcard(this.keys.webhookIds(workspaceId))) === 0)
      await this.redis.srem(this.keys.webhookWorkspaces(), workspaceId);
    return true;
  }

  async saveDelivery(record: WebhookDeliveryRecord, keep: number): Promise<void> {
    const log = this.keys.webhookLog(record.workspaceId, record.endpointId);
    await this.redis.set(this.keys.webhookDelivery(record.workspaceId, record.id), JSON.stringify(record), "PX", DELIVERY_TTL_MS);
    // Only a delivery new to the log can make it too long: an update costs no count.
    if ((await this.redis.zadd(log, "NX", record.createdAt, record.id)) === 0) return;
    const excess = (await this.redis.zcard(log)) - keep;
    if (excess <= 0) return;
    const dropped = (await this.redis.zpopmin(log, excess)).filter((_, index) => index % 2 === 0);
    if (dropped.length > 0) await this.redis.del(...dropped.map((id) => this.keys.webhookDelivery(record.workspaceId, id)));
  }

  async getDelivery(workspaceId: string, id: string): Promise<WebhookDeliveryRecord | null> {
    return (await readJson<WebhookDeliveryRecord>(this.redis, this.keys.webhookDelivery(workspaceId, id)))?.record ?? null;
  }

  async listDeliveries(workspaceId: string, endpointId: string, limit: number): Promise<WebhookDeliveryRecord[]> {
    const ids = await this.redis.zrevrange(this.keys.webhookLog(workspaceId, endpointId), 0, limit - 1);
    if (ids.length === 0) return [];
    const raws = await this.redis.mget(ids.map((id) => this.keys.webhookDelivery(workspaceId, id)));
    return raws.filter((raw): raw is string => raw !== null).map((raw) => JSON.parse(raw) as WebhookDeliveryRecord);
  }

  async claim(workspaceId: string, name: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(this.keys.webhookClaim(workspaceId, name), "1", "PX", Math.max(1, Math.ceil(ttlMs)), "NX")) === "OK";
  }
}
