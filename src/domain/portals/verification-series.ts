import type { AnalyticsRow } from "../analytics/analytics-service.js";

const OUTCOME_FIELDS = {
  VALID: "valid",
  RATE_LIMITED: "rateLimited",
  INSUFFICIENT_PERMISSIONS: "insufficientPermissions",
  FORBIDDEN: "forbidden",
  DISABLED: "disabled",
  EXPIRED: "expired",
  USAGE_EXCEEDED: "usageExceeded",
} as const;

type OutcomeField = (typeof OUTCOME_FIELDS)[keyof typeof OUTCOME_FIELDS];
export type OutcomeCounts = { total: number } & Record<OutcomeField, number>;

/** One bucket of portal.getVerifications (Unkey's data point), with keygate's per-key counts when asked for. */
export interface VerificationPoint extends OutcomeCounts {
  time: number;
  keys?: ({ keyId: string } & OutcomeCounts)[];
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const KEY_ID = /^key_[1-9A-HJ-NP-Za-km-z]+$/;

/** The bucket for a window: minutes up to 6 hours, hours up to 14 days, days beyond (at most a few hundred buckets for a year). */
export function bucketSize(windowMs: number): number {
  if (windowMs <= 6 * HOUR) return MINUTE;
  if (windowMs <= 14 * DAY) return HOUR;
  return DAY;
}

function zero(): OutcomeCounts {
  return { total: 0, valid: 0, rateLimited: 0, insufficientPermissions: 0, forbidden: 0, disabled: 0, expired: 0, usageExceeded: 0 };
}

function add(counts: OutcomeCounts, outcome: string, n: number): void {
  counts.total += n;
  const field = OUTCOME_FIELDS[outcome as keyof typeof OUTCOME_FIELDS];
  if (field) counts[field] += n;
}

/**
 * The verifications of `keyIds` in [startTime, endTime) as a contiguous series, zero-filled, oldest first: one
 * grouped query (`run` executes it confined to the caller's workspace and APIs), the buckets filled in here.
 */
export async function verificationSeries(
  run: (query: string) => Promise<AnalyticsRow[]>,
  keyIds: readonly string[],
  input: { startTime: number; endTime: number; byKey: boolean },
): Promise<VerificationPoint[]> {
  const size = bucketSize(input.endTime - input.startTime);
  const first = Math.floor(input.startTime / size) * size;
  const points: VerificationPoint[] = [];
  const byTime = new Map<number, VerificationPoint>();
  for (let time = first; time < input.endTime; time += size) {
    const point: VerificationPoint = { time, ...zero() };
    if (input.byKey) point.keys = [];
    points.push(point);
    byTime.set(time, point);
  }
  const ids = keyIds.filter((id) => KEY_ID.test(id));
  if (ids.length === 0) return points;
  const rows = await run(
    `SELECT intDiv(time, ${size}) * ${size} AS bucket, key_id, outcome, count() AS n FROM key_verifications_v1 ` +
      `WHERE time >= ${Math.floor(input.startTime)} AND time < ${Math.floor(input.endTime)} ` +
      `AND key_id IN (${ids.map((id) => `'${id}'`).join(", ")}) GROUP BY bucket, key_id, outcome`,
  );
  for (const row of rows) {
    const point = byTime.get(Number(row.bucket));
    if (!point) continue;
    const n = Number(row.n);
    add(point, String(row.outcome), n);
    if (point.keys) {
      const keyId = String(row.key_id);
      let perKey = point.keys.find((entry) => entry.keyId === keyId);
      if (!perKey) {
        perKey = { keyId, ...zero() };
        point.keys.push(perKey);
      }
      add(perKey, String(row.outcome), n);
    }
  }
  return points;
}
