/**
 * The tables analytics queries may read (docs/decisions.md#analytics): Unkey's verification tables, and keygate's
 * rate limit and gateway request tables. They are real tables of the analytics database under these names: the raw
 * tables receive the events, materialized views keep the aggregates.
 */

/** How a table's `time` column counts: unix milliseconds (raw), a DateTime bucket, or a Date bucket. */
export type TimeColumn = "unixMs" | "dateTime" | "date";

export interface RetentionDays {
  raw: number;
  perMinute: number;
  perHour: number;
  perDay: number;
  perMonth: number;
  /** The audit log's raw table (audit_logs_v1). */
  audit: number;
}

export interface PublicTable {
  readonly name: string;
  readonly time: TimeColumn;
  readonly retention: keyof RetentionDays;
  /** Width of one time bucket (raw: none), used as slack when comparing a query's time bound with retention. */
  readonly bucketMs: number;
}

/**
 * The tables one analytics procedure reads: a raw table and its aggregates. Every row carries `workspace_id`, and
 * `scopeColumn` names what a root key's permission may narrow the rows to (key spaces, namespaces or APIs).
 */
export interface TableFamily {
  /** The procedure that reads these tables. */
  readonly procedure: "analytics.getVerifications" | "analytics.getRatelimits" | "analytics.getGatewayRequests";
  readonly tables: readonly PublicTable[];
  readonly scopeColumn: "key_space_id" | "namespace_id" | "api_id";
}

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

/** A raw table and, when `aggregated`, its per-minute, hour, day and month tables named `<base>_per_<unit>_v1`. */
function tablesOf(base: string, aggregated: boolean): PublicTable[] {
  const raw: PublicTable = { name: `${base}_v1`, time: "unixMs", retention: "raw", bucketMs: 0 };
  if (!aggregated) return [raw];
  return [
    raw,
    { name: `${base}_per_minute_v1`, time: "dateTime", retention: "perMinute", bucketMs: MINUTE_MS },
    { name: `${base}_per_hour_v1`, time: "dateTime", retention: "perHour", bucketMs: HOUR_MS },
    { name: `${base}_per_day_v1`, time: "date", retention: "perDay", bucketMs: DAY_MS },
    { name: `${base}_per_month_v1`, time: "date", retention: "perMonth", bucketMs: 31 * DAY_MS },
  ];
}

export const VERIFICATION_TABLES: TableFamily = {
  procedure: "analytics.getVerifications",
  tables: tablesOf("key_verifications", true),
  scopeColumn: "key_space_id",
};

export const RATELIMIT_TABLES: TableFamily = {
  procedure: "analytics.getRatelimits",
  tables: tablesOf("ratelimits", true),
  scopeColumn: "namespace_id",
};

export const GATEWAY_REQUEST_TABLES: TableFamily = {
  procedure: "analytics.getGatewayRequests",
  tables: tablesOf("gateway_requests", false),
  scopeColumn: "api_id",
};

export const TABLE_FAMILIES: readonly TableFamily[] = [VERIFICATION_TABLES, RATELIMIT_TABLES, GATEWAY_REQUEST_TABLES];

/** Every table any analytics procedure reads. */
export const PUBLIC_TABLES: readonly PublicTable[] = TABLE_FAMILIES.flatMap((family) => family.tables);

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
