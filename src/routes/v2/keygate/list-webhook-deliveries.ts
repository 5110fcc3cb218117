import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defined } from "../../../lib/defined.js";
import { defineProcedure } from "../procedure.js";
import { WebhookDeliveryResponse, WebhookId } from "./webhook-wire.js";

export default defineProcedure({
  name: "keygate.listWebhookDeliveries",
  audit: "none",
  body: Strict({ webhookId: WebhookId, limit: Type.Integer({ minimum: 1, maximum: 1_000, default: 100 }) }),
  data: Type.Array(WebhookDeliveryResponse),
  handler: async ({ body, caller, services }) =>
    (await services.webhooks.service.deliveries(caller, body)).map((record) => ({
      deliveryId: record.id,
      type: record.type,
      status: record.status,
      attempts: record.attempts,
      createdAt: record.createdAt,
      ...defined({
        lastAttemptAt: record.lastAttemptAt,
        nextAttemptAt: record.nextAttemptAt,
        responseCode: record.responseCode,
        lastError: record.lastError,
      }),
    })),
});
