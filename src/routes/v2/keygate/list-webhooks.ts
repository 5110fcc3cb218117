import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { WebhookResponse } from "./webhook-wire.js";

export default defineProcedure({
  name: "keygate.listWebhooks",
  audit: "none",
  body: Strict({}),
  data: Type.Array(WebhookResponse),
  handler: ({ caller, services }) => services.webhooks.service.list(caller),
});
