import { Type } from "typebox";
import { defineProcedure } from "../procedure.js";
import { LimitBody, toLimitRequest, withLimitFields } from "./wire.js";

export default defineProcedure({
  name: "ratelimit.limit",
  audit: "none",
  aliases: ["ratelimits.limit"],
  body: LimitBody,
  data: Type.Object({
    limit: Type.Integer(),
    remaining: Type.Integer(),
    reset: Type.Integer(),
    success: Type.Boolean(),
    overrideId: Type.Optional(Type.String()),
  }),
  handler: async ({ body, caller, services, requestId }) => {
    const result = await services.ratelimit.limit(caller, toLimitRequest(body), requestId);
    return withLimitFields({ success: result.passed }, result);
  },
});
