import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { WebhookId } from "./webhook-wire.js";

export default defineProcedure({
  name: "keygate.rotateWebhookSecret",
  audit: ["webhook.rotate_secret"],
  body: Strict({
    webhookId: WebhookId,
    /** How long the secret before keeps signing too; a day by default. */
    gracePeriodMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 7 * 24 * 3_600_000 })),
  }),
  data: Type.Object({ secret: Type.String(), previousSecretExpires: Type.Integer() }),
  handler: async ({ body, caller, services }) => {
    const input =
      body.gracePeriodMs === undefined ? { webhookId: body.webhookId } : { webhookId: body.webhookId, graceMs: body.gracePeriodMs };
    const { secret, previousValidUntil } = await services.webhooks.service.rotateSecret(caller, input);
    return { secret, previousSecretExpires: previousValidUntil };
  },
});
