import { randomBytes } from "node:crypto";
import type { KeygateConfig } from "./config/schema.js";
import type { AnalyticsQueryEngine } from "./domain/analytics/query-engine.js";
import type { AuditTrail } from "./domain/audit/audit-trail.js";
import { UsageReportRunner } from "./domain/usage/usage-report-runner.js";
import { UsageReporter } from "./domain/usage/usage-reporter.js";
import { WebhookDeliverer, type WebhookSender } from "./domain/webhooks/deliverer.js";
import { WebhookDispatcher } from "./domain/webhooks/dispatcher.js";
import { scanExpiringKeys } from "./domain/webhooks/expiring-keys.js";
import { WebhookRunner } from "./domain/webhooks/webhook-runner.js";
import { WebhookSecrets } from "./domain/webhooks/webhook-secrets.js";
import { WebhookService } from "./domain/webhooks/webhook-service.js";
import { HttpWebhookSender } from "./http/webhook-sender.js";
import type { Clock } from "./lib/clock.js";
import { defined } from "./lib/defined.js";
import { type Scheduler, systemScheduler } from "./lib/scheduler.js";
import type { Vault } from "./lib/vault.js";
import type { Stores } from "./storage/interfaces.js";

/** Everything of webhooks one process runs: the procedures, the sink notices go to, and the background delivery. */
export interface Webhooks {
  service: WebhookService;
  dispatcher: WebhookDispatcher;
  deliverer: WebhookDeliverer;
  runner: WebhookRunner;
  /** Usage reports (usage.reported, usage.corrected) and keygate.replayUsageReports. */
  usageReporter: UsageReporter;
  /** Runs the usage reporter in the background once started (with `runner`, on instances that deliver). */
  usageRunner: UsageReportRunner;
  /** Closes the sender's pooled connections (call once the runners stopped). */
  closeConnections(): Promise<void>;
}

export interface WebhookWiringOptions {
  /** How attempts are sent; HTTP under the configured rules by default. */
  sender?: WebhookSender;
  scheduler?: Scheduler;
  /** This instance's consumer name; random by default. */
  instanceId?: string;
  onError?: (error: unknown, what: string) => void;
  /** Where the keygate.*Webhook writes record their entries. */
  audit?: AuditTrail;
  /** The analytics engine usage reports are made from; none when analytics is off (no reports). */
  analyticsEngine?: AnalyticsQueryEngine;
}

/** The usage reports' margin after the analytics flush interval: a batch that needed a retry or two (docs/usage.md#delay). */
export const USAGE_REPORT_MARGIN_MS = 60_000;

export function createWebhooks(
  stores: Stores,
  config: KeygateConfig,
  clock: Clock,
  vault: Vault | undefined,
  options: WebhookWiringOptions = {},
): Webhooks {
  const settings = config.webhooks;
  const onError = options.onError ?? (() => {});
  const secrets = new WebhookSecrets(vault);
  const owner = options.instanceId ?? `instance_${randomBytes(8).toString("hex")}`;
  let runner: WebhookRunner | undefined;
  const dispatcher = new WebhookDispatcher({
    store: stores.webhooks,
    outbox: stores.webhookOutbox,
    clock,
    keepDeliveries: settings.keepDeliveries,
    maxWaiting: 100_000,
    onError: (error, notice) => onError(error, `a ${notice.type} notice was lost`),
    onEnqueued: () => runner?.wake(),
  });
  const http = options.sender
    ? undefined
    : new HttpWebhookSender({
        timeoutMs: settings.timeoutMs,
        maxResponseBytes: settings.maxResponseBytes,
        allowPrivateAddresses: settings.allowPrivateAddresses,
      });
  const deliverer = new WebhookDeliverer({
    store: stores.webhooks,
    outbox: stores.webhookOutbox,
    sender: options.sender ?? (http as HttpWebhookSender),
    secrets,
    clock,
    owner,
    settings: {
      leaseMs: settings.leaseMs,
      attemptTimeoutMs: settings.timeoutMs,
      maxQueues: 64,
      batch: 32,
      retryDelayMs: settings.retryDelayMs,
      maxRetryDelayMs: settings.maxRetryDelayMs,
      giveUpAfterMs: settings.giveUpAfterMs,
      disableAfterMs: settings.disableAfterMs,
      keepDeliveries: settings.keepDeliveries,
    },
  });
  runner = new WebhookRunner({
    deliver: () => deliverer.deliverDue(),
    scan: () =>
      scanExpiringKeys({
        webhooks: stores.webhooks,
        apis: stores.apis,
        keys: stores.keys,
        identities: stores.identities,
        notices: dispatcher,
        clock,
        leadMs: settings.expiringLeadMs,
      }),
    scheduler: options.scheduler ?? systemScheduler,
    pollMs: settings.pollIntervalMs,
    scanIntervalMs: settings.expiringScanIntervalMs,
    onError: (error) => onError(error, "webhook delivery"),
  });
  const usageReporter = new UsageReporter({
    engine: options.analyticsEngine,
    webhooks: stores.webhooks,
    identities: stores.identities,
    keys: stores.keys,
    progress: stores.usageReports,
    outbox: dispatcher,
    clock,
    owner,
    settings: {
      delayMs: config.analytics.buffer.flushIntervalMs + USAGE_REPORT_MARGIN_MS,
      leaseMs: Math.max(60_000, 4 * settings.usageReportIntervalMs),
      correctionWindowMs: settings.usageCorrectionWindowMs,
      maxPeriodsPerPass: 24,
      rawRetentionDays: config.analytics.retentionDays.raw,
    },
    ...defined({ audit: options.audit }),
    onError: (error, endpoint) => onError(error, `the usage reports of webhook ${endpoint.id} (made on a later pass)`),
  });
  const usageRunner = new UsageReportRunner(usageReporter, options.scheduler ?? systemScheduler, settings.usageReportIntervalMs, (error) =>
    onError(error, "usage reports"),
  );
  const service = new WebhookService({
    store: stores.webhooks,
    outbox: stores.webhookOutbox,
    dispatcher,
    secrets,
    clock,
    allowPrivateAddresses: settings.allowPrivateAddresses,
    maxEndpoints: settings.maxEndpoints,
    usageReports: options.analyticsEngine !== undefined,
    ...defined({ audit: options.audit }),
  });
  return { service, dispatcher, deliverer, runner, usageReporter, usageRunner, closeConnections: async () => http?.close() };
}
