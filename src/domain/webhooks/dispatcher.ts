import type { Clock } from "../../lib/clock.js";
import { newId } from "../../lib/ids.js";
import type { WebhookOutbox, WebhookStore } from "../../storage/webhook-interfaces.js";
import type { OutboxMessage, WebhookDeliveryRecord, WebhookEndpointRecord } from "../../storage/webhook-records.js";
import type { Notice, NoticeSink } from "../notices.js";
import { eventBody, eventData, workspaceOf } from "./events.js";

export interface DispatcherDeps {
  store: WebhookStore;
  outbox: WebhookOutbox;
  clock: Clock;
  /** How many deliveries each endpoint's log keeps. */
  keepDeliveries: number;
  /** Notices waiting to be written to the outbox, at most; beyond it they are dropped (and told to onError). */
  maxWaiting: number;
  /** Told when a notice is lost: the outbox or the store could not be written, or too many were waiting. */
  onError: (error: unknown, notice: Notice) => void;
  /** Told once messages are in the outbox (this instance's deliverer wakes). */
  onEnqueued?: () => void;
}

const DONE: Promise<void> = Promise.resolve();

/** Notices written to the outbox together, at most. */
const BATCH = 256;

/** How long a workspace's endpoints are trusted in process; this instance's own changes drop them at once. */
const ENDPOINTS_FRESH_MS = 1_000;

/**
 * The webhook dispatcher: the NoticeSink behind every notice. `post` only queues the notice in memory and returns
 * its receipt; one notice at a time, in the order posted, is then matched against the workspace's enabled endpoints
 * subscribed to its type and written to the outbox as one message per endpoint, with its delivery's record, a batch
 * of waiting notices per outbox write (the notices of concurrent requests share one). A receipt resolves once its
 * notice's batch is written; the request that posted it is answered only then, so an answered write's notices are
 * in the outbox (in Redis: they survive a crash of this process). A notice whose write fails is lost (reported to
 * onError, its receipt resolved): notices are not replayed.
 */
export class WebhookDispatcher implements NoticeSink {
  private readonly deps: DispatcherDeps;
  private readonly waiting: Notice[] = [];
  private running: Promise<void> | null = null;
  /** A workspace's endpoints as last read (`read` once the read is done), and when the read began. */
  private readonly endpoints = new Map<string, { at: number; records: Promise<WebhookEndpointRecord[]>; read?: WebhookEndpointRecord[] }>();
  /** Notices taken by post(), and notices written or lost, since the start: done follows posted, in order. */
  private posted = 0;
  private done = 0;
  /** Who waits for notices up to a count, in the order of their counts. */
  private waiters: { upTo: number; resolve: () => void }[] = [];

  constructor(deps: DispatcherDeps) {
    this.deps = deps;
  }

  post(notice: Notice): Promise<void> {
    // Nobody to tell, as far as this instance knows now: nothing to write, nothing for the request to wait for.
    const known = this.freshEndpoints(workspaceOf(notice));
    if (known !== undefined && !known.some((endpoint) => endpoint.enabled && endpoint.events.includes(notice.type))) return DONE;
    if (this.waiting.length >= this.deps.maxWaiting) {
      this.deps.onError(new Error("too many notices waiting for the webhook outbox"), notice);
      return DONE;
    }
    this.waiting.push(notice);
    this.posted++;
    const receipt = this.settled();
    if (!this.running) this.running = this.drain();
    return receipt;
  }

  settled(): Promise<void> {
    if (this.done >= this.posted) return Promise.resolve();
    const upTo = this.posted;
    return new Promise((resolve) => this.waiters.push({ upTo, resolve }));
  }

  /** Resolves once every notice posted so far is in the outbox (or lost). */
  async flush(): Promise<void> {
    while (this.running) await this.running;
  }

  /** Forgets the cached endpoints of a workspace: they were changed on this instance. */
  endpointsChanged(workspaceId: string): void {
    this.endpoints.delete(workspaceId);
  }

  /** Puts one event for one endpoint in the outbox, whatever it subscribes to (testWebhook). */
  async enqueueFor(endpoint: WebhookEndpointRecord, type: string, data: Record<string, unknown>): Promise<string> {
    const [message] = await this.enqueue([endpoint], type, data);
    return (message as OutboxMessage).id;
  }

  /**
   * Puts events made elsewhere in the outbox for one endpoint, in order, each under its own id and with its body as
   * given (usage reports: ids derived from what they report, so that a repeat carries the same `webhook-id`).
   */
  async enqueuePrepared(endpoint: WebhookEndpointRecord, events: readonly PreparedEvent[]): Promise<void> {
    const now = this.deps.clock.now();
    await this.write(
      events.map(
        (event): OutboxMessage => ({
          id: event.id,
          workspaceId: endpoint.workspaceId,
          endpointId: endpoint.id,
          type: event.type,
          payload: event.payload,
          createdAt: now,
        }),
      ),
    );
  }

  /**
   * Writes what is waiting, a batch at a time: each notice's messages in the order posted, the delivery records
   * together, then the batch's messages in one outbox write. A batch that fails is lost, each notice reported.
   */
  private async drain(): Promise<void> {
    for (let batch = this.waiting.splice(0, BATCH); batch.length > 0; batch = this.waiting.splice(0, BATCH)) {
      const messages: OutboxMessage[] = [];
      const dispatched: Notice[] = [];
      for (const notice of batch) {
        try {
          for (const message of await this.messagesFor(notice)) messages.push(message);
          dispatched.push(notice);
        } catch (error) {
          this.deps.onError(error, notice);
        }
      }
      try {
        await this.write(messages);
      } catch (error) {
        for (const notice of dispatched) this.deps.onError(error, notice);
      }
      this.handled(batch.length);
    }
    this.running = null;
  }

  /** `count` more notices are written or lost: whoever waited for them goes on. */
  private handled(count: number): void {
    this.done += count;
    let settled = 0;
    while (settled < this.waiters.length && (this.waiters[settled] as { upTo: number }).upTo <= this.done) {
      (this.waiters[settled] as { resolve: () => void }).resolve();
      settled++;
    }
    if (settled > 0) this.waiters = this.waiters.slice(settled);
  }

  /** The notice's messages, one per enabled endpoint subscribed to its type (none for a window already told). */
  private async messagesFor(notice: Notice): Promise<OutboxMessage[]> {
    const workspaceId = workspaceOf(notice);
    const subscribed = (await this.endpointsOf(workspaceId)).filter(
      (endpoint) => endpoint.enabled && endpoint.events.includes(notice.type),
    );
    if (subscribed.length === 0) return [];
    // A window exceeded is told once, whichever instance saw it first; the claim lasts until the window ends.
    if (notice.type === "ratelimit.exceeded") {
      const name = `ratelimit:${notice.namespaceId}:${notice.reset}:${notice.identifier}`;
      if (!(await this.deps.store.claim(workspaceId, name, Math.max(1, notice.reset - this.deps.clock.now())))) return [];
    }
    return this.messages(subscribed, notice.type, eventData(notice));
  }

  private async enqueue(
    endpoints: readonly WebhookEndpointRecord[],
    type: string,
    data: Record<string, unknown>,
  ): Promise<OutboxMessage[]> {
    const messages = this.messages(endpoints, type, data);
    await this.write(messages);
    return messages;
  }

  private messages(endpoints: readonly WebhookEndpointRecord[], type: string, data: Record<string, unknown>): OutboxMessage[] {
    const now = this.deps.clock.now();
    const payload = eventBody(type, now, data);
    return endpoints.map(
      (endpoint): OutboxMessage => ({
        id: newId("msg", now),
        workspaceId: endpoint.workspaceId,
        endpointId: endpoint.id,
        type,
        payload,
        createdAt: now,
      }),
    );
  }

  /** The records first, so a message the deliverer takes always has one to update; then the messages, in order. */
  private async write(messages: readonly OutboxMessage[]): Promise<void> {
    if (messages.length === 0) return;
    await Promise.all(messages.map((message) => this.deps.store.saveDelivery(pending(message), this.deps.keepDeliveries)));
    await this.deps.outbox.enqueue(messages, this.deps.clock.now());
    this.deps.onEnqueued?.();
  }

  private endpointsOf(workspaceId: string): Promise<WebhookEndpointRecord[]> {
    const now = this.deps.clock.now();
    const cached = this.endpoints.get(workspaceId);
    if (cached && now - cached.at < ENDPOINTS_FRESH_MS) return cached.records;
    const records = this.deps.store.list(workspaceId);
    if (this.endpoints.size >= 10_000) this.endpoints.clear();
    const entry: { at: number; records: Promise<WebhookEndpointRecord[]>; read?: WebhookEndpointRecord[] } = { at: now, records };
    this.endpoints.set(workspaceId, entry);
    records.then(
      (read) => {
        entry.read = read;
      },
      () => this.endpoints.delete(workspaceId),
    );
    return records;
  }

  /** The workspace's endpoints when a read of them is done and still fresh; undefined otherwise. */
  private freshEndpoints(workspaceId: string): WebhookEndpointRecord[] | undefined {
    const cached = this.endpoints.get(workspaceId);
    if (!cached || this.deps.clock.now() - cached.at >= ENDPOINTS_FRESH_MS) return undefined;
    return cached.read;
  }
}

/** An event whose id and body its producer made (enqueuePrepared). */
export interface PreparedEvent {
  id: string;
  type: string;
  /** The JSON body as sent. */
  payload: string;
}

/** The delivery record of a message not yet tried. */
export function pending(message: OutboxMessage): WebhookDeliveryRecord {
  return {
    id: message.id,
    workspaceId: message.workspaceId,
    endpointId: message.endpointId,
    type: message.type,
    status: "pending",
    attempts: 0,
    createdAt: message.createdAt,
  };
}
