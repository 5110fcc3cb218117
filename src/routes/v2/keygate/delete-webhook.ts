import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { WebhookId } from "./webhook-wire.js";

export default defineProcedure({
  name: "keygate.deleteWebhook",
  audit: ["webhook.delete"],
  body: Strict({ webhookId: WebhookId }),
  data: Type.Object({}),
  handler: async ({ body, caller, services }) => {
    await services.webhooks.service.delete(caller, body);
    return {};
  },
});
