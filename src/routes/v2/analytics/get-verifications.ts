import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";

/** Longest SQL accepted, in characters; a longer query is 400 invalid_input at body.query. */
export const MAX_ANALYTICS_QUERY_LENGTH = 10_000;

/** The body of every analytics procedure. */
export const AnalyticsQueryBody = Strict({ query: Type.String({ minLength: 1, maxLength: MAX_ANALYTICS_QUERY_LENGTH }) });

/** Rows are free-form: exactly the fields the query selects, in its order. */
export const AnalyticsRows = Type.Array(Type.Record(Type.String(), Type.Unknown()));

export default defineProcedure({
  name: "analytics.getVerifications",
  audit: "none",
  body: AnalyticsQueryBody,
  data: AnalyticsRows,
  handler: ({ body, caller, services }) => services.analytics.getVerifications(caller, body),
});
