import { KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { defined } from "../../lib/defined.js";
import { newId } from "../../lib/ids.js";
import { isPrivateAddress } from "../../lib/private-addresses.js";
import type { WebhookOutbox, WebhookStore } from "../../storage/webhook-interfaces.js";
import type { WebhookDeliveryRecord, WebhookEndpointRecord } from "../../storage/webhook-records.js";
import { type AuditTrail, changesOf, created, removed, UNAUDITED } from "../audit/audit-trail.js";
import type { Caller } from "../caller.js";
import { requireWebhook } from "../root-keys/permissions.js";
import type { WebhookDispatcher } from "./dispatcher.js";
import { TEST_EVENT_TYPE, USAGE_EVENT_TYPES } from "./events.js";
import type { WebhookSecrets } from "./webhook-secrets.js";

export interface WebhookServiceDeps {
  store: WebhookStore;
  outbox: WebhookOutbox;
  dispatcher: WebhookDispatcher;
  secrets: WebhookSecrets;
  clock: Clock;
  /** Whether endpoints may be on loopback, private or link-local addresses (tests, closed networks). */
  allowPrivateAddresses: boolean;
  /** Endpoints a workspace may have, at most. */
  maxEndpoints: number;
  /** Where the writes record their entries (never a secret, and an endpoint's URL only as its origin). */
  audit?: AuditTrail;
  /** Whether usage reports can be made (analytics is on): subscribing to usage.* needs it. */
  usageReports: boolean;
}

/** An endpoint as listed: everything but its secrets. */
export interface WebhookView {
  webhookId: string;
  url: string;
  events: string[];
  description?: string;
  enabled: boolean;
  createdAt: number;
  updatedAt?: number;
  failingSince?: number;
  disabledReason?: string;
  /** The periods of its usage reports, when it subscribes to a usage event. */
  usagePeriod?: "hourly" | "daily";
}

type UsagePeriod = "hourly" | "daily";

const DEFAULT_GRACE_MS = 24 * 3_600_000;

/** The keygate.*Webhook procedures: endpoints of the caller's workspace, their secrets, test events and deliveries. */
export class WebhookService {
  private readonly deps: WebhookServiceDeps;
  private readonly audit: AuditTrail;

  constructor(deps: WebhookServiceDeps) {
    this.deps = deps;
    this.audit = deps.audit ?? UNAUDITED;
  }

  async create(
    caller: Caller,
    input: { url: string; events: string[]; description?: string; usagePeriod?: UsagePeriod },
  ): Promise<{ webhookId: string; secret: string }> {
    caller.authorize(requireWebhook("create_webhook"));
    const url = this.checkUrl(input.url);
    this.checkUsage(input.events);
    if ((await this.deps.store.list(caller.workspaceId)).length >= this.deps.maxEndpoints)
      throw invalid("body.url", `a workspace may have at most ${this.deps.maxEndpoints} webhook endpoints`);
    const now = this.deps.clock.now();
    const id = newId("wh", now);
    const secret = this.deps.secrets.generate();
    const record: WebhookEndpointRecord = {
      id,
      workspaceId: caller.workspaceId,
      url,
      events: [...new Set(input.events)],
      ...defined({ description: input.description }),
      enabled: true,
      secret: this.deps.secrets.seal(secret, caller.workspaceId, id),
      createdAt: now,
      ...defined({
        usagePeriod: input.usagePeriod ?? (subscribesToUsage(input.events) ? "hourly" : undefined),
        usageReportsFrom: input.events.includes("usage.reported") ? now : undefined,
      }),
    };
    if (!(await this.deps.store.create(record))) throw new Error("webhook id collision; try again");
    this.deps.dispatcher.endpointsChanged(caller.workspaceId);
    this.audit.record(caller, {
      action: "webhook.create",
      description: `Created webhook ${id}`,
      resources: [{ type: "webhook", id }],
      changes: created(audited(view(record))),
    });
    return { webhookId: id, secret };
  }

  async list(caller: Caller): Promise<WebhookView[]> {
    caller.authorize(requireWebhook("read_webhook"));
    return (await this.deps.store.list(caller.workspaceId))
      .filter((record) => caller.can(requireWebhook("read_webhook", record.id)))
      .map(view);
  }

  async update(
    caller: Caller,
    input: {
      webhookId: string;
      url?: string;
      events?: string[];
      enabled?: boolean;
      description?: string | null;
      usagePeriod?: UsagePeriod;
    },
  ): Promise<WebhookView> {
    caller.authorize(requireWebhook("update_webhook", input.webhookId));
    const url = input.url === undefined ? undefined : this.checkUrl(input.url);
    if (input.events !== undefined) this.checkUsage(input.events);
    const now = this.deps.clock.now();
    let before: WebhookEndpointRecord | undefined;
    const updated = await this.deps.store.update(caller.workspaceId, input.webhookId, (current) => {
      before = current;
      const next: WebhookEndpointRecord = { ...current, updatedAt: now };
      if (url !== undefined) next.url = url;
      if (input.events !== undefined) {
        next.events = [...new Set(input.events)];
        // Reports start with the period it subscribes in; the periods while it did not are not reported.
        if (next.events.includes("usage.reported") && !current.events.includes("usage.reported")) next.usageReportsFrom = now;
        if (subscribesToUsage(next.events)) next.usagePeriod ??= "hourly";
      }
      if (input.usagePeriod !== undefined) next.usagePeriod = input.usagePeriod;
      if (input.description === null) delete next.description;
      else if (input.description !== undefined) next.description = input.description;
      if (input.enabled !== undefined) next.enabled = input.enabled;
      // Enabled again by hand: the failures before no longer count.
      if (input.enabled === true) {
        delete next.disabledReason;
        delete next.failingSince;
      }
      return next;
    });
    if (!updated) throw notFound(input.webhookId);
    this.deps.dispatcher.endpointsChanged(caller.workspaceId);
    this.audit.record(caller, {
      action: "webhook.update",
      description: `Updated webhook ${updated.id}`,
      resources: [{ type: "webhook", id: updated.id }],
      changes: changesOf(audited(view(before as WebhookEndpointRecord)), audited(view(updated)), AUDITED_FIELDS),
    });
    return view(updated);
  }

  async delete(caller: Caller, input: { webhookId: string }): Promise<void> {
    caller.authorize(requireWebhook("delete_webhook", input.webhookId));
    const endpoint = await this.find(caller, input.webhookId);
    if (!(await this.deps.store.delete(caller.workspaceId, input.webhookId))) throw notFound(input.webhookId);
    await this.deps.outbox.drop(input.webhookId);
    this.deps.dispatcher.endpointsChanged(caller.workspaceId);
    this.audit.record(caller, {
      action: "webhook.delete",
      description: `Deleted webhook ${endpoint.id}`,
      resources: [{ type: "webhook", id: endpoint.id }],
      changes: removed(audited(view(endpoint))),
    });
  }

  /** A new secret, shown once; the one before keeps signing (alongside) for `graceMs`. */
  async rotateSecret(
    caller: Caller,
    input: { webhookId: string; graceMs?: number },
  ): Promise<{ secret: string; previousValidUntil: number }> {
    caller.authorize(requireWebhook("update_webhook", input.webhookId));
    const secret = this.deps.secrets.generate();
    const now = this.deps.clock.now();
    const until = now + (input.graceMs ?? DEFAULT_GRACE_MS);
    const updated = await this.deps.store.update(caller.workspaceId, input.webhookId, (current) => ({
      ...current,
      secret: this.deps.secrets.seal(secret, current.workspaceId, current.id),
      previousSecret: { secret: current.secret, until },
      updatedAt: now,
    }));
    if (!updated) throw notFound(input.webhookId);
    this.audit.record(caller, {
      action: "webhook.rotate_secret",
      description: `Rotated the signing secret of webhook ${updated.id}; the previous one signs until ${new Date(until).toISOString()}`,
      resources: [{ type: "webhook", id: updated.id }],
      changes: [],
    });
    return { secret, previousValidUntil: until };
  }

  /** Queues a `webhook.test` event for the endpoint, delivered (and logged) as any other. */
  async test(caller: Caller, input: { webhookId: string }): Promise<{ messageId: string }> {
    caller.authorize(requireWebhook("update_webhook", input.webhookId));
    const endpoint = await this.find(caller, input.webhookId);
    const messageId = await this.deps.dispatcher.enqueueFor(endpoint, TEST_EVENT_TYPE, {
      workspaceId: caller.workspaceId,
      webhookId: endpoint.id,
    });
    this.audit.record(caller, {
      action: "webhook.test",
      description: `Sent a test event to webhook ${endpoint.id}`,
      resources: [{ type: "webhook", id: endpoint.id }],
      changes: [],
    });
    return { messageId };
  }

  async deliveries(caller: Caller, input: { webhookId: string; limit: number }): Promise<WebhookDeliveryRecord[]> {
    caller.authorize(requireWebhook("read_webhook", input.webhookId));
    await this.find(caller, input.webhookId);
    return this.deps.store.listDeliveries(caller.workspaceId, input.webhookId, input.limit);
  }

  private async find(caller: Caller, webhookId: string): Promise<WebhookEndpointRecord> {
    const endpoint = await this.deps.store.get(caller.workspaceId, webhookId);
    if (!endpoint) throw notFound(webhookId);
    return endpoint;
  }

  /** usage.* events are made from analytics: with analytics off an endpoint cannot subscribe to them (412). */
  private checkUsage(events: readonly string[]): void {
    if (subscribesToUsage(events) && !this.deps.usageReports)
      throw new KeygateError(
        "err:unkey:data:analytics_not_configured",
        "usage.reported and usage.corrected are made from analytics, which is turned off on this keygate (analytics.engine is 'off').",
      );
  }

  /** http or https with a host; an address literal refused by the delivery rule is refused now (names at delivery). */
  private checkUrl(raw: string): string {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw invalid("body.url", "must be an absolute http or https URL");
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw invalid("body.url", "must be an http or https URL");
    if (url.username !== "" || url.password !== "") throw invalid("body.url", "must not carry credentials");
    const host = url.hostname;
    const literal = /^[\d.]+$/.test(host) || host.startsWith("[");
    if (
      (literal || host === "localhost") &&
      !this.deps.allowPrivateAddresses &&
      isPrivateAddress(host === "localhost" ? "127.0.0.1" : host)
    )
      throw invalid("body.url", "names a loopback, private or link-local address, which webhooks.allowPrivateAddresses does not allow");
    return url.toString();
  }
}

function view(record: WebhookEndpointRecord): WebhookView {
  return {
    webhookId: record.id,
    url: record.url,
    events: record.events,
    ...defined({ description: record.description }),
    enabled: record.enabled,
    createdAt: record.createdAt,
    ...defined({
      updatedAt: record.updatedAt,
      failingSince: record.failingSince,
      disabledReason: record.disabledReason,
      usagePeriod: record.usagePeriod,
    }),
  };
}

function subscribesToUsage(events: readonly string[]): boolean {
  return events.some((event) => (USAGE_EVENT_TYPES as readonly string[]).includes(event));
}

const AUDITED_FIELDS = ["url", "events", "description", "enabled", "usagePeriod"];

/**
 * An endpoint's fields as the audit log keeps them: its URL only as its origin, since a receiver's path or query
 * often carries a token of its own.
 */
function audited(endpoint: WebhookView): Record<string, unknown> {
  return {
    url: new URL(endpoint.url).origin,
    events: endpoint.events,
    description: endpoint.description,
    enabled: endpoint.enabled,
    usagePeriod: endpoint.usagePeriod,
  };
}

function notFound(webhookId: string): KeygateError {
  return new KeygateError("err:keygate:data:webhook_not_found", `The webhook '${webhookId}' does not exist.`);
}

function invalid(location: string, message: string): KeygateError {
  return new KeygateError("err:unkey:application:invalid_input", `${location} ${message}`, { errors: [{ location, message }] });
}
