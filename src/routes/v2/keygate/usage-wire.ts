import { type TSchema, Type } from "typebox";
import { OUTCOMES } from "../../../domain/usage/usage-numbers.js";
import { StringEnum } from "../../../http/schemas.js";
import { Expires } from "../schemas.js";

// What keygate.getUsage and keygate.replayUsageReports share on the wire.

export const UsageGranularity = StringEnum(["hourly", "daily", "monthly"]);
/** A point in time, unix ms (the same bounds as an expiry). */
export const UsageTime = Expires;

const Count = Type.Integer();

export const UsageNumbers = Type.Object({
  requests: Count,
  outcomes: Type.Object(Object.fromEntries(OUTCOMES.map((outcome) => [outcome, Count])) as Record<string, TSchema>),
  credits: Type.Object({ total: Count, key: Count, identity: Count }),
});

export const UsageBucket = Type.Object({
  start: Type.Integer(),
  end: Type.Integer(),
  requests: Count,
  outcomes: UsageNumbers.properties.outcomes,
  credits: UsageNumbers.properties.credits,
});
