import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { WebhookId } from "./webhook-wire.js";

export default defineProcedure({
  name: "keygate.testWebhook",
  audit: ["webhook.test"],
  body: Strict({ webhookId: WebhookId }),
  /** The queued message's id (`webhook-id`); listWebhookDeliveries shows how it went. */
  data: Type.Object({ deliveryId: Type.String() }),
  handler: async ({ body, caller, services }) => ({ deliveryId: (await services.webhooks.service.test(caller, body)).messageId }),
});
