import { Type } from "typebox";
import { StringEnum } from "../../../http/schemas.js";
import { Expires } from "../schemas.js";

// What keygate.getUsage and keygate.replayUsageReports share on the wire.

export const UsageGranularity = StringEnum(["hourly", "daily", "monthly"]);
/** A point in time, unix ms (the same bounds as an expiry). */
export const UsageTime = Expires;

const Count = Type.Integer();

export const UsageNumbers = Type.Object({
  requests: Count,
  /** Every verification code (usage-numbers.ts OUTCOMES). */
  outcomes: Type.Object({
    VALID: Count,
    RATE_LIMITED: Count,
    USAGE_EXCEEDED: Count,
    DISABLED: Count,
    EXPIRED: Count,
    FORBIDDEN: Count,
    INSUFFICIENT_PERMISSIONS: Count,
    NOT_FOUND: Count,
  }),
  credits: Type.Object({ total: Count, key: Count, identity: Count }),
});

export const UsageBucket = Type.Object({
  start: Type.Integer(),
  end: Type.Integer(),
  requests: Count,
  outcomes: UsageNumbers.properties.outcomes,
  credits: UsageNumbers.properties.credits,
});
