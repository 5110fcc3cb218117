import { type Static, Type } from "typebox";
import { Strict } from "../http/schemas.js";
import { EMPTY } from "./schema-parts.js";

const HOUR = 3_600_000;

/** Webhooks (docs/webhooks.md): delivery, retries, the address rule and the key.expiring scan. */
export const WebhooksConfigSchema = Strict(
  {
    /** Deliver webhooks from this instance; false leaves the outbox to other instances (events are still queued). */
    deliver: Type.Boolean({ default: true }),
    /** Allow endpoints on loopback, private, link-local and other non-public addresses (refused by default). */
    allowPrivateAddresses: Type.Boolean({ default: false }),
    /** An attempt's deadline, connection to answer. */
    timeoutMs: Type.Integer({ minimum: 100, maximum: 60_000, default: 10_000 }),
    /** Bytes of an endpoint's answer read, at most. */
    maxResponseBytes: Type.Integer({ minimum: 0, maximum: 1_048_576, default: 4_096 }),
    /** How often an idle instance looks for due deliveries. */
    pollIntervalMs: Type.Integer({ minimum: 10, maximum: 60_000, default: 500 }),
    /** How long an instance holds an endpoint's queue; a stopped instance's deliveries resume after it. */
    leaseMs: Type.Integer({ minimum: 1_000, maximum: 600_000, default: 30_000 }),
    /** First retry delay; each next one doubles, up to maxRetryDelayMs. */
    retryDelayMs: Type.Integer({ minimum: 10, maximum: HOUR, default: 5_000 }),
    maxRetryDelayMs: Type.Integer({ minimum: 10, maximum: 24 * HOUR, default: HOUR }),
    /** A delivery still failing this long after its event is failed. */
    giveUpAfterMs: Type.Integer({ minimum: 1_000, maximum: 7 * 24 * HOUR, default: 24 * HOUR }),
    /** An endpoint whose deliveries fail this long without one success is disabled. */
    disableAfterMs: Type.Integer({ minimum: 1_000, maximum: 30 * 24 * HOUR, default: 5 * 24 * HOUR }),
    /** key.expiring is told this long before a key expires. */
    expiringLeadMs: Type.Integer({ minimum: 60_000, maximum: 90 * 24 * HOUR, default: 24 * HOUR }),
    /** How often the key.expiring scan runs. */
    expiringScanIntervalMs: Type.Integer({ minimum: 1_000, maximum: 24 * HOUR, default: 5 * 60_000 }),
    /** Deliveries kept in each endpoint's log (listWebhookDeliveries). */
    keepDeliveries: Type.Integer({ minimum: 10, maximum: 10_000, default: 1_000 }),
    /** Endpoints per workspace, at most. */
    maxEndpoints: Type.Integer({ minimum: 1, maximum: 1_000, default: 50 }),
    /** How often an instance looks for closed periods to report (usage.reported, docs/usage.md). */
    usageReportIntervalMs: Type.Integer({ minimum: 1_000, maximum: HOUR, default: 30_000 }),
    /** How far back a period already reported is checked for late usage (usage.corrected); 0: never. */
    usageCorrectionWindowMs: Type.Integer({ minimum: 0, maximum: 7 * 24 * HOUR, default: 24 * HOUR }),
  },
  EMPTY,
);

export type WebhooksConfig = Static<typeof WebhooksConfigSchema>;
