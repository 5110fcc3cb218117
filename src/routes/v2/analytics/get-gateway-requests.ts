import { defineProcedure } from "../procedure.js";
import { AnalyticsQueryBody, AnalyticsRows } from "./get-verifications.js";

export default defineProcedure({
  name: "analytics.getGatewayRequests",
  audit: "none",
  body: AnalyticsQueryBody,
  data: AnalyticsRows,
  handler: ({ body, caller, services }) => services.analytics.getGatewayRequests(caller, body),
});
