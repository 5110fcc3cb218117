/**
 * Usage periods in UTC: an hour, a day, or a calendar month. getUsage's buckets and the reports' periods are both
 * these, so that a report's numbers are a bucket of getUsage's.
 */

export type UsageGranularity = "hourly" | "daily" | "monthly";

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/** The start of the period of `granularity` that holds `at` (unix ms). */
export function periodStart(granularity: UsageGranularity, at: number): number {
  if (granularity === "hourly") return Math.floor(at / HOUR_MS) * HOUR_MS;
  if (granularity === "daily") return Math.floor(at / DAY_MS) * DAY_MS;
  const date = new Date(at);
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
}

/** The end of the period that holds `at`: the start of the next one. */
export function periodEnd(granularity: UsageGranularity, at: number): number {
  if (granularity === "hourly") return periodStart(granularity, at) + HOUR_MS;
  if (granularity === "daily") return periodStart(granularity, at) + DAY_MS;
  const date = new Date(at);
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
}

/** The periods' starts from the one holding `start` to the last one starting before `end`, oldest first. */
export function periodStarts(granularity: UsageGranularity, start: number, end: number): number[] {
  const starts: number[] = [];
  for (let at = periodStart(granularity, start); at < end; at = periodEnd(granularity, at)) starts.push(at);
  return starts;
}

/** How many periods [start, end) touches, without listing them (bounds are checked before any work). */
export function periodCount(granularity: UsageGranularity, start: number, end: number): number {
  if (end <= start) return 0;
  const first = periodStart(granularity, start);
  if (granularity === "hourly") return Math.ceil((end - first) / HOUR_MS);
  if (granularity === "daily") return Math.ceil((end - first) / DAY_MS);
  const from = new Date(first);
  const to = new Date(end - 1);
  return (to.getUTCFullYear() - from.getUTCFullYear()) * 12 + to.getUTCMonth() - from.getUTCMonth() + 1;
}
