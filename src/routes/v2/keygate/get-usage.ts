import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { ApiId, KeyId } from "../schemas.js";
import { UsageBucket, UsageGranularity, UsageNumbers, UsageTime } from "./usage-wire.js";

/** Keygate's own: what a workspace, an API, an identity or a key used, in UTC buckets, exact (docs/usage.md). */
export default defineProcedure({
  name: "keygate.getUsage",
  audit: "none",
  body: Strict({
    apiId: Type.Optional(ApiId),
    /** An identity's id or externalId. */
    identity: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    keyId: Type.Optional(KeyId),
    granularity: UsageGranularity,
    start: UsageTime,
    end: Type.Optional(UsageTime),
  }),
  data: Type.Object({
    granularity: Type.String(),
    start: Type.Integer(),
    end: Type.Integer(),
    buckets: Type.Array(UsageBucket),
    totals: UsageNumbers,
  }),
  handler: ({ body, caller, services }) => services.usage.getUsage(caller, body),
});
