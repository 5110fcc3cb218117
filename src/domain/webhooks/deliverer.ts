import type { Clock } from "../../lib/clock.js";
import type { OutboxEntry, OutboxLease, WebhookOutbox, WebhookStore } from "../../storage/webhook-interfaces.js";
import type { WebhookDeliveryRecord, WebhookEndpointRecord } from "../../storage/webhook-records.js";
import { pending } from "./dispatcher.js";
import type { WebhookSecrets } from "./webhook-secrets.js";

/** One attempt at sending a message, as the sender gets it. */
export interface WebhookAttempt {
  url: string;
  /** `webhook-id`: the message's id, the same on every attempt. */
  id: string;
  /** `webhook-timestamp`: unix seconds of this attempt. */
  timestamp: number;
  payload: string;
  /** Every secret that signs it: the current one, and during a rotation's grace period the one before. */
  secrets: string[];
}

export interface AttemptResult {
  ok: boolean;
  status?: number;
  error?: string;
}

/** Sends one attempt over HTTP (http/webhook-sender.ts); never throws. */
export interface WebhookSender {
  send(attempt: WebhookAttempt): Promise<AttemptResult>;
}

export interface DeliverySettings {
  /** How long a lease on an endpoint's queue lasts: a dead deliverer's messages wait this long. */
  leaseMs: number;
  /** The longest an attempt may take (the sender's timeout); no attempt starts later than leaseMs - this into a lease. */
  attemptTimeoutMs: number;
  /** Queues one pass leases, at most. */
  maxQueues: number;
  /** Messages read from a queue at a time. */
  batch: number;
  /** The first retry's delay; each next one doubles, up to maxRetryDelayMs. */
  retryDelayMs: number;
  maxRetryDelayMs: number;
  /** A message still undelivered this long after it was made is failed. */
  giveUpAfterMs: number;
  /** An endpoint whose deliveries have failed this long without a success is disabled. */
  disableAfterMs: number;
  keepDeliveries: number;
}

export interface DelivererDeps {
  store: WebhookStore;
  outbox: WebhookOutbox;
  sender: WebhookSender;
  secrets: WebhookSecrets;
  clock: Clock;
  /** This instance's name in the consumer group. */
  owner: string;
  settings: DeliverySettings;
}

/** The delay before retry number `attempts` (1: the first retry): exponential, capped. */
export function retryDelay(attempts: number, settings: Pick<DeliverySettings, "retryDelayMs" | "maxRetryDelayMs">): number {
  return Math.min(settings.retryDelayMs * 2 ** Math.max(0, attempts - 1), settings.maxRetryDelayMs);
}

/**
 * Takes due queues from the outbox and delivers their messages one by one, in order: a message that fails holds
 * its endpoint's queue until its retry (so events of one key never overtake each other) and is failed once
 * giveUpAfterMs old; an endpoint failing for disableAfterMs is disabled with the reason.
 */
export class WebhookDeliverer {
  private readonly deps: DelivererDeps;

  constructor(deps: DelivererDeps) {
    this.deps = deps;
  }

  /** One pass: leases what is due and delivers it. Resolves with the number of attempts made. */
  async deliverDue(): Promise<number> {
    const { outbox, owner, clock, settings } = this.deps;
    const leases = await outbox.lease(owner, clock.now(), settings.leaseMs, settings.maxQueues);
    const attempts = await Promise.all(leases.map((lease) => this.deliverQueue(lease)));
    return attempts.reduce((sum, n) => sum + n, 0);
  }

  private async deliverQueue(lease: OutboxLease): Promise<number> {
    const { outbox, clock, settings } = this.deps;
    const leasedAt = clock.now();
    let attempts = 0;
    let nextAt = leasedAt;
    try {
      for (;;) {
        const entries = await outbox.head(lease, settings.batch);
        if (entries.length === 0) break;
        const outcome = await this.deliverEntries(lease, entries, leasedAt);
        attempts += outcome.attempts;
        if (outcome.retryAt !== undefined) {
          nextAt = outcome.retryAt;
          break;
        }
        if (outcome.outOfTime) break;
      }
    } finally {
      await outbox.release(lease, nextAt);
    }
    return attempts;
  }

  /** Delivers entries in order until one fails (its retry time returned) or the lease runs short. */
  private async deliverEntries(
    lease: OutboxLease,
    entries: readonly OutboxEntry[],
    leasedAt: number,
  ): Promise<{ attempts: number; retryAt?: number; outOfTime?: boolean }> {
    const { outbox, store, clock, settings } = this.deps;
    let attempts = 0;
    // Read once per batch (an update below replaces it): every entry of a queue is for the same endpoint.
    let endpoint: WebhookEndpointRecord | null | undefined;
    for (const entry of entries) {
      if (clock.now() - leasedAt > settings.leaseMs - settings.attemptTimeoutMs) return { attempts, outOfTime: true };
      const message = entry.message;
      if (endpoint === undefined) endpoint = await store.get(message.workspaceId, message.endpointId);
      const record = (await store.getDelivery(message.workspaceId, message.id)) ?? pending(message);
      if (!endpoint?.enabled) {
        await this.finish(
          record,
          "failed",
          endpoint ? (endpoint.disabledReason ?? "the endpoint is disabled") : "the endpoint was deleted",
        );
        await outbox.ack(lease, [entry.entryId]);
        continue;
      }
      attempts += 1;
      const now = clock.now();
      const result = await this.deps.sender.send({
        url: endpoint.url,
        id: message.id,
        timestamp: Math.floor(now / 1000),
        payload: message.payload,
        secrets: this.secretsOf(endpoint, now),
      });
      record.attempts += 1;
      record.lastAttemptAt = now;
      if (result.status !== undefined) record.responseCode = result.status;
      else delete record.responseCode;
      if (result.ok) {
        delete record.lastError;
        await this.finish(record, "delivered");
        await outbox.ack(lease, [entry.entryId]);
        if (endpoint.failingSince !== undefined) endpoint = await this.recovered(endpoint);
        continue;
      }
      record.lastError = result.error ?? `answered ${result.status}`;
      endpoint = await this.failing(endpoint, now);
      if (now - message.createdAt >= settings.giveUpAfterMs || !endpoint.enabled) {
        await this.finish(record, "failed", record.lastError);
        await outbox.ack(lease, [entry.entryId]);
        continue;
      }
      record.nextAttemptAt = now + retryDelay(record.attempts, settings);
      await store.saveDelivery(record, settings.keepDeliveries);
      return { attempts, retryAt: record.nextAttemptAt };
    }
    return { attempts };
  }

  private secretsOf(endpoint: WebhookEndpointRecord, now: number): string[] {
    const { secrets } = this.deps;
    const current = secrets.open(endpoint.secret, endpoint.workspaceId, endpoint.id);
    const previous = endpoint.previousSecret;
    if (!previous || previous.until <= now) return [current];
    return [current, secrets.open(previous.secret, endpoint.workspaceId, endpoint.id)];
  }

  private async finish(record: WebhookDeliveryRecord, status: "delivered" | "failed", error?: string): Promise<void> {
    record.status = status;
    delete record.nextAttemptAt;
    if (error !== undefined) record.lastError = error;
    await this.deps.store.saveDelivery(record, this.deps.settings.keepDeliveries);
  }

  /** Notes the failure on the endpoint; one failing for disableAfterMs is disabled. Returns the endpoint as stored. */
  private async failing(endpoint: WebhookEndpointRecord, now: number): Promise<WebhookEndpointRecord> {
    const { disableAfterMs } = this.deps.settings;
    const since = endpoint.failingSince ?? now;
    if (endpoint.failingSince !== undefined && now - since < disableAfterMs) return endpoint;
    const updated = await this.deps.store.update(endpoint.workspaceId, endpoint.id, (current) => {
      const next = { ...current, failingSince: current.failingSince ?? now };
      if (now - next.failingSince >= disableAfterMs && current.enabled) {
        next.enabled = false;
        next.disabledReason = `disabled by keygate at ${new Date(now).toISOString()}: deliveries failed for ${Math.round(disableAfterMs / 3_600_000)} hours`;
      }
      return next;
    });
    return updated ?? endpoint;
  }

  private async recovered(endpoint: WebhookEndpointRecord): Promise<WebhookEndpointRecord | null> {
    return this.deps.store.update(endpoint.workspaceId, endpoint.id, (current) => {
      const { failingSince: _gone, ...rest } = current;
      return rest;
    });
  }
}
