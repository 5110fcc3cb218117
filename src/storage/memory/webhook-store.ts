import type { Clock } from "../../lib/clock.js";
import type { WebhookStore } from "../webhook-interfaces.js";
import type { WebhookDeliveryRecord, WebhookEndpointRecord } from "../webhook-records.js";

export class MemoryWebhookStore implements WebhookStore {
  private readonly endpoints = new Map<string, WebhookEndpointRecord>();
  private readonly deliveries = new Map<string, WebhookDeliveryRecord>();
  /** Delivery ids per endpoint, oldest first. */
  private readonly logs = new Map<string, string[]>();
  private readonly claims = new Map<string, number>();
  private readonly clock: Clock;

  constructor(clock: Clock) {
    this.clock = clock;
  }

  async create(record: WebhookEndpointRecord): Promise<boolean> {
    const id = `${record.workspaceId}/${record.id}`;
    if (this.endpoints.has(id)) return false;
    this.endpoints.set(id, structuredClone(record));
    return true;
  }

  async get(workspaceId: string, id: string): Promise<WebhookEndpointRecord | null> {
    const record = this.endpoints.get(`${workspaceId}/${id}`);
    return record ? structuredClone(record) : null;
  }

  async list(workspaceId: string): Promise<WebhookEndpointRecord[]> {
    return [...this.endpoints.values()]
      .filter((record) => record.workspaceId === workspaceId)
      .sort((a, b) => (a.id < b.id ? -1 : 1))
      .map((record) => structuredClone(record));
  }

  async workspaces(): Promise<string[]> {
    return [...new Set([...this.endpoints.values()].map((record) => record.workspaceId))].sort();
  }

  async update(
    workspaceId: string,
    id: string,
    change: (current: WebhookEndpointRecord) => WebhookEndpointRecord | null,
  ): Promise<WebhookEndpointRecord | null> {
    const current = this.endpoints.get(`${workspaceId}/${id}`);
    if (!current) return null;
    const next = change(structuredClone(current));
    if (!next) return null;
    this.endpoints.set(`${workspaceId}/${id}`, structuredClone(next));
    return structuredClone(next);
  }

  async delete(workspaceId: string, id: string): Promise<boolean> {
    if (!this.endpoints.delete(`${workspaceId}/${id}`)) return false;
    for (const deliveryId of this.logs.get(`${workspaceId}/${id}`) ?? []) this.deliveries.delete(`${workspaceId}/${deliveryId}`);
    this.logs.delete(`${workspaceId}/${id}`);
    return true;
  }

  async saveDelivery(record: WebhookDeliveryRecord, keep: number): Promise<void> {
    const key = `${record.workspaceId}/${record.id}`;
    if (!this.deliveries.has(key)) {
      const logKey = `${record.workspaceId}/${record.endpointId}`;
      const log = this.logs.get(logKey) ?? [];
      log.push(record.id);
      for (const dropped of log.splice(0, Math.max(0, log.length - keep))) this.deliveries.delete(`${record.workspaceId}/${dropped}`);
      this.logs.set(logKey, log);
    }
    this.deliveries.set(key, structuredClone(record));
  }

  async getDelivery(workspaceId: string, id: string): Promise<WebhookDeliveryRecord | null> {
    const record = this.deliveries.get(`${workspaceId}/${id}`);
    return record ? structuredClone(record) : null;
  }

  async listDeliveries(workspaceId: string, endpointId: string, limit: number): Promise<WebhookDeliveryRecord[]> {
    const log = this.logs.get(`${workspaceId}/${endpointId}`) ?? [];
    return log
      .slice(-limit)
      .reverse()
      .map((id) => structuredClone(this.deliveries.get(`${workspaceId}/${id}`) as WebhookDeliveryRecord));
  }

  async claim(workspaceId: string, name: string, ttlMs: number): Promise<boolean> {
    const key = `${workspaceId}/${name}`;
    const now = this.clock.now();
    const until = this.claims.get(key);
    if (until !== undefined && until > now) return false;
    this.claims.set(key, now + ttlMs);
    if (this.claims.size > 10_000) for (const [k, v] of this.claims) if (v <= now) this.claims.delete(k);
    return true;
  }
}
