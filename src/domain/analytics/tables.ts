/**
 * The tables analytics queries may read (reference §8). They are real tables of the analytics database under
 * these names: the raw table receives the events, materialized views keep the four aggregates.
 */

/** How a table's `time` column counts: unix milliseconds (raw), a DateTime bucket, or a Date bucket. */
export type TimeColumn = "unixMs" | "dateTime" | "date";

export interface RetentionDays {
  raw: number;
  perMinute: number;
  perHour: number;
  perDay: number;
  perMonth: number;
}

export interface PublicTable {
  readonly name: string;
  readonly time: TimeColumn;
  readonly retention: keyof RetentionDays;
  /** Width of one time bucket (raw: none), used as slack when comparing a query's time bound with retention. */
  readonly bucketMs: number;
}

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

export const RAW_TABLE: PublicTable = { name: "key_verifications_v1", time: "unixMs", retention: "raw", bucketMs: 0 };

export const PUBLIC_TABLES: readonly PublicTable[] = [
  RAW_TABLE,
  { name: "key_verifications_per_minute_v1", time: "dateTime", retention: "perMinute", bucketMs: MINUTE_MS },
  { name: "key_verifications_per_hour_v1", time: "dateTime", retention: "perHour", bucketMs: HOUR_MS },
  { name: "key_verifications_per_day_v1", time: "date", retention: "perDay", bucketMs: DAY_MS },
  { name: "key_verifications_per_month_v1", time: "date", retention: "perMonth", bucketMs: 31 * DAY_MS },
];

export function publicTable(name: string): PublicTable | undefined {
  return PUBLIC_TABLES.find((table) => table.name === name);
}

/**
 * The earliest instant a query may see in `table` at `nowMs`: now minus the table's retention, lowered to the start
 * of its bucket so that the oldest bucket still in retention is shown whole.
 */
export function retentionCutoffMs(table: PublicTable, retentionDays: RetentionDays, nowMs: number): number {
  const cutoff = nowMs - retentionDays[table.retention] * DAY_MS;
  if (table.retention === "perMonth") {
    const date = new Date(cutoff);
    return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
  }
  return table.bucketMs === 0 ? cutoff : cutoff - (cutoff % table.bucketMs);
}
