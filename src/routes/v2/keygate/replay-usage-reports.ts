import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { UsageTime } from "./usage-wire.js";
import { WebhookId } from "./webhook-wire.js";

/** Keygate's own: an endpoint's usage.reported events of past periods again, with the ids they were sent with. */
export default defineProcedure({
  name: "keygate.replayUsageReports",
  audit: ["webhook.replay_usage_reports"],
  body: Strict({ webhookId: WebhookId, start: UsageTime, end: UsageTime }),
  data: Type.Object({ periods: Type.Integer(), reports: Type.Integer() }),
  handler: ({ body, caller, services }) => services.webhooks.usageReporter.replay(caller, body),
});
