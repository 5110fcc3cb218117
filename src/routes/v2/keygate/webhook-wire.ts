import { Type } from "typebox";
import { WEBHOOK_EVENT_TYPES } from "../../../domain/webhooks/events.js";
import { ID_PATTERN, StringEnum } from "../../../http/schemas.js";

// What the keygate.*Webhook procedures share on the wire.

export const WebhookId = Type.String({ minLength: 3, maxLength: 255, pattern: ID_PATTERN });
export const WebhookUrl = Type.String({ minLength: 1, maxLength: 2_048 });
export const WebhookEvents = Type.Array(StringEnum(WEBHOOK_EVENT_TYPES as readonly string[]), { minItems: 1, maxItems: 20 });
export const WebhookDescription = Type.String({ minLength: 1, maxLength: 500 });
/** The periods of an endpoint's usage reports (docs/usage.md). */
export const WebhookUsagePeriod = StringEnum(["hourly", "daily"]);

export const WebhookResponse = Type.Object({
  webhookId: Type.String(),
  url: Type.String(),
  events: Type.Array(Type.String()),
  description: Type.Optional(Type.String()),
  enabled: Type.Boolean(),
  createdAt: Type.Integer(),
  updatedAt: Type.Optional(Type.Integer()),
  /** Since when deliveries fail without a success in between. */
  failingSince: Type.Optional(Type.Integer()),
  /** Why keygate disabled the endpoint, when it did. */
  disabledReason: Type.Optional(Type.String()),
  /** The periods of its usage reports, when it subscribes to a usage event. */
  usagePeriod: Type.Optional(Type.String()),
});

export const WebhookDeliveryResponse = Type.Object({
  deliveryId: Type.String(),
  type: Type.String(),
  status: Type.String(),
  attempts: Type.Integer(),
  createdAt: Type.Integer(),
  lastAttemptAt: Type.Optional(Type.Integer()),
  nextAttemptAt: Type.Optional(Type.Integer()),
  responseCode: Type.Optional(Type.Integer()),
  lastError: Type.Optional(Type.String()),
});
