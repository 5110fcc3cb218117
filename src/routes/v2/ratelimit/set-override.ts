import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { DurationField, IdentifierField, NamespaceField } from "./wire.js";

export default defineProcedure({
  name: "ratelimit.setOverride",
  audit: ["ratelimit.set_override"],
  aliases: ["ratelimits.setOverride"],
  body: Strict({
    namespace: NamespaceField,
    /** An exact identifier, or a pattern where `*` matches any run of characters. */
    identifier: IdentifierField,
    /** 0 blocks every request of the identifier. */
    limit: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
    duration: DurationField,
  }),
  data: Type.Object({ overrideId: Type.String() }),
  handler: ({ body, caller, services }) =>
    services.ratelimit.setOverride(caller, {
      namespace: body.namespace,
      identifier: body.identifier,
      limit: body.limit,
      durationMs: body.duration,
    }),
});
