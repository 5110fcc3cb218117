import { Type } from "typebox";
import { defineProcedure } from "../procedure.js";
import { LimitBody, toLimitRequest, withLimitFields } from "./wire.js";

export default defineProcedure({
  name: "ratelimit.multiLimit",
  audit: "none",
  aliases: ["ratelimits.multiLimit"],
  body: Type.Array(LimitBody, { minItems: 1, maxItems: 100 }),
  data: Type.Object({
    passed: Type.Boolean(),
    limits: Type.Array(
      Type.Object({
        namespace: Type.String(),
        identifier: Type.String(),
        limit: Type.Integer(),
        remaining: Type.Integer(),
        reset: Type.Integer(),
        passed: Type.Boolean(),
        overrideId: Type.Optional(Type.String()),
      }),
    ),
  }),
  handler: async ({ body, caller, services, requestId }) => {
    const outcome = await services.ratelimit.multiLimit(caller, body.map(toLimitRequest), requestId);
    return {
      passed: outcome.passed,
      limits: outcome.decisions.map((decision) =>
        withLimitFields({ namespace: decision.name, identifier: decision.identifier, passed: decision.passed }, decision),
      ),
    };
  },
});
