import type { OutboxMessage, WebhookDeliveryRecord, WebhookEndpointRecord } from "./webhook-records.js";

/** Webhook endpoints, their delivery log, and claims that make a notice once-only across instances. */
export interface WebhookStore {
  /** Stores a new endpoint. Returns false (and changes nothing) when one with this id exists. */
  create(record: WebhookEndpointRecord): Promise<boolean>;
  get(workspaceId: string, id: string): Promise<WebhookEndpointRecord | null>;
  /** The workspace's endpoints, ordered by id. */
  list(workspaceId: string): Promise<WebhookEndpointRecord[]>;
  /** The workspaces that have at least one endpoint (the expiring-key scan visits only these). */
  workspaces(): Promise<string[]>;
  /** Replaces an endpoint with what `change` makes of it (null: leave it). Returns the stored result, or null. */
  update(
    workspaceId: string,
    id: string,
    change: (current: WebhookEndpointRecord) => WebhookEndpointRecord | null,
  ): Promise<WebhookEndpointRecord | null>;
  /** Removes an endpoint and its delivery log. Returns false when there was none. */
  delete(workspaceId: string, id: string): Promise<boolean>;
  /** Writes a delivery's record (new or changed); the log keeps the newest `keep` of each endpoint. */
  saveDelivery(record: WebhookDeliveryRecord, keep: number): Promise<void>;
  getDelivery(workspaceId: string, id: string): Promise<WebhookDeliveryRecord | null>;
  /** An endpoint's deliveries, newest first, at most `limit`. */
  listDeliveries(workspaceId: string, endpointId: string, limit: number): Promise<WebhookDeliveryRecord[]>;
  /** True for the first caller to claim `name` until `ttlMs` has passed, false for every other (any instance). */
  claim(workspaceId: string, name: string, ttlMs: number): Promise<boolean>;
}

/** A message handed to a deliverer, with the outbox's handle to acknowledge it by. */
export interface OutboxEntry {
  entryId: string;
  message: OutboxMessage;
}

/** An endpoint's queue, leased to one deliverer at a time so that its messages go out one by one, in order. */
export interface OutboxLease {
  endpointId: string;
  owner: string;
}

/**
 * The durable queue of deliveries, one ordered queue per endpoint. Delivery is at-least-once: a message leaves only
 * when acknowledged, and a deliverer that dies holding a lease leaves its messages to whoever leases next.
 */
export interface WebhookOutbox {
  /** Appends each message to its endpoint's queue, in the order given, and makes those queues due now. */
  enqueue(messages: readonly OutboxMessage[], now: number): Promise<void>;
  /** Leases up to `max` queues due by `now` to `owner` for `leaseMs`. */
  lease(owner: string, now: number, leaseMs: number, max: number): Promise<OutboxLease[]>;
  /** The first `count` messages of a leased queue, oldest first (those a dead deliverer held come first). */
  head(lease: OutboxLease, count: number): Promise<OutboxEntry[]>;
  /** Removes delivered or abandoned messages. */
  ack(lease: OutboxLease, entryIds: readonly string[]): Promise<void>;
  /** Gives the queue up: due again at `nextAt` while messages remain in it. */
  release(lease: OutboxLease, nextAt: number): Promise<void>;
  /** Drops an endpoint's queue (the endpoint was deleted). */
  drop(endpointId: string): Promise<void>;
}
