import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { WebhookDescription, WebhookEvents, WebhookUrl, WebhookUsagePeriod } from "./webhook-wire.js";

export default defineProcedure({
  name: "keygate.createWebhook",
  audit: ["webhook.create"],
  body: Strict({
    url: WebhookUrl,
    events: WebhookEvents,
    description: Type.Optional(WebhookDescription),
    usagePeriod: Type.Optional(WebhookUsagePeriod),
  }),
  /** The secret is shown this once. */
  data: Type.Object({ webhookId: Type.String(), secret: Type.String() }),
  handler: ({ body, caller, services }) => services.webhooks.service.create(caller, body),
});
