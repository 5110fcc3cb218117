import type { RetentionDays } from "../domain/analytics/tables.js";

/**
 * The analytics schema (docs/decisions.md#analytics: Unkey's verification tables, and keygate's rate limit and
 * gateway request tables): for each kind of event a raw table, and for verifications and rate limits four
 * aggregates kept by materialized views, each with a retention TTL. Every statement is idempotent, so start-up
 * runs them all on every start and on every instance; the TTLs are re-applied so a changed retention setting takes
 * effect.
 *
 * Table names are the public ones; the views live in the same database under names no query may read (the query
 * guard allows public tables only). Times are UTC. Aggregates keep every dimension in their sorting key, so rows
 * merged by AggregatingMergeTree only ever add up counts of the same dimensions.
 */

const SECONDS = "toDateTime(intDiv(time, 1000), 'UTC')";

interface RawTable {
  name: string;
  /** Column definitions after `request_id`, `time` and `workspace_id`, which every raw table starts with. */
  columns: string;
  /**
   * Columns added since the table was first released, after `columns`: a new table is created with them, and a
   * table created before gets them from an ALTER that every start runs (a no-op once they are there), so that old
   * and new installations have the same columns in the same order. Rows written before read them as "".
   */
  added?: readonly string[];
  /** Sorting key after workspace_id and time. */
  orderBy: string;
  /** Which retention setting is its TTL (`raw` unless said). */
  retention?: "raw" | "audit";
}

interface AggregatedFamily {
  raw: string;
  /** Public name of the aggregates: `<base>_per_minute_v1`…, views `<base>_per_minute_mv_v1`…. */
  base: string;
  /** The dimensions kept (workspace_id first), with their types. */
  dimensions: [name: string, type: string][];
  /** The aggregate's measure columns with their types. */
  measures: string;
  /** Raw columns the measures are computed from (besides latency), as the inner SELECT names them. */
  sources: string;
  /** The measures' expressions over `sources`, in the order of `measures`. */
  states: string;
}

interface Granularity {
  unit: "minute" | "hour" | "day" | "month";
  timeType: string;
  /** Turns the raw `time` (unix ms) into this table's bucket. */
  bucket: string;
  partition: string;
  retention: keyof RetentionDays;
}

const GRANULARITIES: readonly Granularity[] = [
  {
    unit: "minute",
    timeType: "DateTime('UTC')",
    bucket: `toStartOfMinute(${SECONDS})`,
    partition: "toYYYYMMDD(time)",
    retention: "perMinute",
  },
  { unit: "hour", timeType: "DateTime('UTC')", bucket: `toStartOfHour(${SECONDS})`, partition: "toYYYYMM(time)", retention: "perHour" },
  { unit: "day", timeType: "Date", bucket: `toDate(${SECONDS})`, partition: "toYYYYMM(time)", retention: "perDay" },
  { unit: "month", timeType: "Date", bucket: `toStartOfMonth(${SECONDS})`, partition: "toYear(time)", retention: "perMonth" },
];

const RAW_TABLES: readonly RawTable[] = [
  {
    name: "key_verifications_v1",
    columns: `key_space_id String,
      identity_id String,
      external_id String,
      key_id String,
      region LowCardinality(String),
      outcome LowCardinality(String),
      tags Array(String),
      spent_credits Int64,
      latency Float64`,
    // Which balance paid spent_credits ('key', 'identity', '' when none): usage by balance (docs/usage.md).
    added: ["credits_source LowCardinality(String)"],
    orderBy: "key_space_id",
  },
  {
    // Added after the first release: a new table, so an existing installation keeps every row it has and gets this
    // one empty (CREATE TABLE IF NOT EXISTS). One compensating row per refund of a verification's credits, under
    // the verification's request_id and time; usage subtracts them (docs/usage.md#refunds).
    name: "credit_refunds_v1",
    columns: `key_space_id String,
      identity_id String,
      external_id String,
      key_id String,
      credits_source LowCardinality(String),
      refunded_credits Int64,
      refunded_at Int64,
      region LowCardinality(String)`,
    orderBy: "key_space_id",
  },
  {
    name: "ratelimits_v1",
    columns: `namespace_id String,
      identifier String,
      passed Bool,
      latency Float64,
      override_id String,
      \`limit\` UInt64,
      remaining UInt64,
      reset_at Int64,
      tokens UInt64,
      region LowCardinality(String)`,
    orderBy: "namespace_id, identifier",
  },
  {
    name: "gateway_requests_v1",
    columns: `api_id String,
      app_id String,
      region LowCardinality(String),
      method LowCardinality(String),
      host String,
      path String,
      query_string String,
      request_headers Array(String),
      response_status Int32,
      response_headers Array(String),
      user_agent String,
      ip_address String,
      total_latency Float64,
      instance_latency Float64,
      gateway_latency Float64,
      key_id String,
      outcome LowCardinality(String)`,
    added: ["request_body String", "response_body String"],
    orderBy: "api_id, app_id",
  },
  {
    name: "audit_logs_v1",
    columns: `audit_id String,
      actor_type LowCardinality(String),
      actor_id String,
      actor_name String,
      action LowCardinality(String),
      description String,
      resource_types Array(String),
      resource_ids Array(String),
      changes String,
      client_address String,
      user_agent String,
      region LowCardinality(String)`,
    orderBy: "audit_id",
    retention: "audit",
  },
];

const LATENCY_MEASURES = `latency_avg AggregateFunction(avg, Float64),
        latency_p75 AggregateFunction(quantileTDigest(0.75), Float64),
        latency_p99 AggregateFunction(quantileTDigest(0.99), Float64)`;
const LATENCY_STATES =
  "avgState(latency) AS latency_avg, quantileTDigestState(0.75)(latency) AS latency_p75, quantileTDigestState(0.99)(latency) AS latency_p99";

const AGGREGATED: readonly AggregatedFamily[] = [
  {
    raw: "key_verifications_v1",
    base: "key_verifications",
    dimensions: [
      ["workspace_id", "String"],
      ["key_space_id", "String"],
      ["identity_id", "String"],
      ["external_id", "String"],
      ["key_id", "String"],
      ["outcome", "LowCardinality(String)"],
      ["tags", "Array(String)"],
    ],
    measures: `count SimpleAggregateFunction(sum, Int64),
        spent_credits SimpleAggregateFunction(sum, Int64)`,
    sources: "spent_credits",
    states: "toInt64(count()) AS count, toInt64(sum(spent_credits)) AS spent_credits",
  },
  {
    raw: "ratelimits_v1",
    base: "ratelimits",
    dimensions: [
      ["workspace_id", "String"],
      ["namespace_id", "String"],
      ["identifier", "String"],
    ],
    measures: `passed SimpleAggregateFunction(sum, Int64),
        total SimpleAggregateFunction(sum, Int64),
        total_tokens SimpleAggregateFunction(sum, Int64),
        passed_tokens SimpleAggregateFunction(sum, Int64)`,
    // Renamed in the inner SELECT so that the measure named `passed` does not shadow the raw column.
    sources: "passed AS decided_passed, tokens",
    states:
      "toInt64(countIf(decided_passed)) AS passed, toInt64(count()) AS total, toInt64(sum(tokens)) AS total_tokens, toInt64(sumIf(tokens, decided_passed)) AS passed_tokens",
  },
];

export function schemaStatements(database: string, retentionDays: RetentionDays): string[] {
  const db = database;
  const statements = [`CREATE DATABASE IF NOT EXISTS ${db}`];
  for (const raw of RAW_TABLES) {
    const ttl = `${SECONDS} + INTERVAL ${retentionDays[raw.retention ?? "raw"]} DAY`;
    const added = raw.added ?? [];
    statements.push(
      `CREATE TABLE IF NOT EXISTS ${db}.${raw.name} (
      request_id String,
      time Int64 CODEC(Delta, ZSTD),
      workspace_id String,
      ${[raw.columns, ...added].join(",\n      ")}
    ) ENGINE = MergeTree
    PARTITION BY toYYYYMMDD(${SECONDS})
    ORDER BY (workspace_id, time, ${raw.orderBy})
    TTL ${ttl}
    SETTINGS ttl_only_drop_parts = 1`,
      `ALTER TABLE ${db}.${raw.name} MODIFY TTL ${ttl} SETTINGS materialize_ttl_after_modify = 0`,
    );
    if (added.length > 0) {
      statements.push(`ALTER TABLE ${db}.${raw.name} ${added.map((column) => `ADD COLUMN IF NOT EXISTS ${column}`).join(", ")}`);
    }
  }
  for (const family of AGGREGATED) {
    const dimensions = family.dimensions.map(([name]) => name).join(", ");
    const dimensionColumns = family.dimensions.map(([name, type]) => `${name} ${type}`).join(",\n        ");
    for (const granularity of GRANULARITIES) {
      const table = `${family.base}_per_${granularity.unit}_v1`;
      const view = `${family.base}_per_${granularity.unit}_mv_v1`;
      const ttl = `time + INTERVAL ${retentionDays[granularity.retention]} DAY`;
      statements.push(
        `CREATE TABLE IF NOT EXISTS ${db}.${table} (
        time ${granularity.timeType},
        ${dimensionColumns},
        ${family.measures},
        ${LATENCY_MEASURES}
      ) ENGINE = AggregatingMergeTree
      PARTITION BY ${granularity.partition}
      ORDER BY (workspace_id, time, ${dimensions.replace("workspace_id, ", "")})
      TTL ${ttl}
      SETTINGS ttl_only_drop_parts = 1`,
        `ALTER TABLE ${db}.${table} MODIFY TTL ${ttl} SETTINGS materialize_ttl_after_modify = 0`,
        // The bucket is computed in a subquery so that naming it `time` does not shadow the raw column it is made of.
        `CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.${view} TO ${db}.${table} AS
      SELECT bucket AS time, ${dimensions}, ${family.states}, ${LATENCY_STATES}
      FROM (SELECT ${granularity.bucket} AS bucket, ${dimensions}, ${family.sources}, latency FROM ${db}.${family.raw})
      GROUP BY bucket, ${dimensions}`,
      );
    }
  }
  return statements;
}
