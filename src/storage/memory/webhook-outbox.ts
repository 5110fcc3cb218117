import type { OutboxEntry, OutboxLease, WebhookOutbox } from "../webhook-interfaces.js";
import type { OutboxMessage } from "../webhook-records.js";

interface Queue {
  entries: OutboxEntry[];
  dueAt: number;
  owner?: string;
  leasedUntil?: number;
}

/** The outbox in this process's memory: what is queued is lost when the process ends (docs/webhooks.md). */
export class MemoryWebhookOutbox implements WebhookOutbox {
  private readonly queues = new Map<string, Queue>();
  private sequence = 0;

  async enqueue(messages: readonly OutboxMessage[], now: number): Promise<void> {
    for (const message of messages) {
      let queue = this.queues.get(message.endpointId);
      if (!queue) {
        queue = { entries: [], dueAt: now };
        this.queues.set(message.endpointId, queue);
      }
      if (queue.entries.length === 0) queue.dueAt = now;
      this.sequence += 1;
      queue.entries.push({ entryId: String(this.sequence), message: structuredClone(message) });
    }
  }

  async lease(owner: string, now: number, leaseMs: number, max: number): Promise<OutboxLease[]> {
    const leased: OutboxLease[] = [];
    for (const [endpointId, queue] of this.queues) {
      if (leased.length >= max) break;
      if (queue.entries.length === 0 || queue.dueAt > now) continue;
      if (queue.leasedUntil !== undefined && queue.leasedUntil > now) continue;
      queue.owner = owner;
      queue.leasedUntil = now + leaseMs;
      leased.push({ endpointId, owner });
    }
    return leased;
  }

  async head(lease: OutboxLease, count: number): Promise<OutboxEntry[]> {
    const queue = this.queues.get(lease.endpointId);
    if (!queue || queue.owner !== lease.owner) return [];
    return queue.entries.slice(0, count).map((entry) => structuredClone(entry));
  }

  async ack(lease: OutboxLease, entryIds: readonly string[]): Promise<void> {
    const queue = this.queues.get(lease.endpointId);
    if (!queue) return;
    const acked = new Set(entryIds);
    queue.entries = queue.entries.filter((entry) => !acked.has(entry.entryId));
  }

  async release(lease: OutboxLease, nextAt: number): Promise<void> {
    const queue = this.queues.get(lease.endpointId);
    if (!queue || queue.owner !== lease.owner) return;
    delete queue.owner;
    delete queue.leasedUntil;
    if (queue.entries.length === 0) this.queues.delete(lease.endpointId);
    else queue.dueAt = nextAt;
  }

  async drop(endpointId: string): Promise<void> {
    this.queues.delete(endpointId);
  }
}
