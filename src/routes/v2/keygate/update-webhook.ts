import { Type } from "typebox";
import { Nullable, Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { WebhookDescription, WebhookEvents, WebhookId, WebhookResponse, WebhookUrl, WebhookUsagePeriod } from "./webhook-wire.js";

export default defineProcedure({
  name: "keygate.updateWebhook",
  audit: ["webhook.update"],
  body: Strict({
    webhookId: WebhookId,
    url: Type.Optional(WebhookUrl),
    events: Type.Optional(WebhookEvents),
    enabled: Type.Optional(Type.Boolean()),
    description: Type.Optional(Nullable(WebhookDescription)),
    usagePeriod: Type.Optional(WebhookUsagePeriod),
  }),
  data: WebhookResponse,
  handler: ({ body, caller, services }) => services.webhooks.service.update(caller, body),
});
