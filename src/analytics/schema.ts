import type { RetentionDays } from "../domain/analytics/tables.js";

/**
 * The analytics schema (reference §8): the raw table the events go to and four aggregates kept by materialized
 * views, each with a retention TTL. Every statement is idempotent, so start-up runs them all on every start and on
 * every instance; the TTLs are re-applied so a changed retention setting takes effect.
 *
 * Table names are the public ones; the views live in the same database under names no query may read (the query
 * guard allows public tables only). Times are UTC. Aggregates keep every dimension in their sorting key, so rows
 * merged by AggregatingMergeTree only ever add up counts of the same dimensions.
 */

const DIMENSIONS = "workspace_id, key_space_id, identity_id, external_id, key_id, outcome, tags";

interface Aggregate {
  table: string;
  view: string;
  timeType: string;
  /** Turns the raw `time` (unix ms) into this table's bucket. */
  bucket: string;
  partition: string;
  retention: keyof RetentionDays;
}

const SECONDS = "toDateTime(intDiv(time, 1000), 'UTC')";

const AGGREGATES: readonly Aggregate[] = [
  {
    table: "key_verifications_per_minute_v1",
    view: "key_verifications_per_minute_mv_v1",
    timeType: "DateTime('UTC')",
    bucket: `toStartOfMinute(${SECONDS})`,
    partition: "toYYYYMMDD(time)",
    retention: "perMinute",
  },
  {
    table: "key_verifications_per_hour_v1",
    view: "key_verifications_per_hour_mv_v1",
    timeType: "DateTime('UTC')",
    bucket: `toStartOfHour(${SECONDS})`,
    partition: "toYYYYMM(time)",
    retention: "perHour",
  },
  {
    table: "key_verifications_per_day_v1",
    view: "key_verifications_per_day_mv_v1",
    timeType: "Date",
    bucket: `toDate(${SECONDS})`,
    partition: "toYYYYMM(time)",
    retention: "perDay",
  },
  {
    table: "key_verifications_per_month_v1",
    view: "key_verifications_per_month_mv_v1",
    timeType: "Date",
    bucket: `toStartOfMonth(${SECONDS})`,
    partition: "toYear(time)",
    retention: "perMonth",
  },
];

export function schemaStatements(database: string, retentionDays: RetentionDays): string[] {
  const db = database;
  const statements = [
    `CREATE DATABASE IF NOT EXISTS ${db}`,
    `CREATE TABLE IF NOT EXISTS ${db}.key_verifications_v1 (
      request_id String,
      time Int64 CODEC(Delta, ZSTD),
      workspace_id String,
      key_space_id String,
      identity_id String,
      external_id String,
      key_id String,
      region LowCardinality(String),
      outcome LowCardinality(String),
      tags Array(String),
      spent_credits Int64,
      latency Float64
    ) ENGINE = MergeTree
    PARTITION BY toYYYYMMDD(${SECONDS})
    ORDER BY (workspace_id, time, key_space_id)
    TTL ${SECONDS} + INTERVAL ${retentionDays.raw} DAY
    SETTINGS ttl_only_drop_parts = 1`,
    `ALTER TABLE ${db}.key_verifications_v1 MODIFY TTL ${SECONDS} + INTERVAL ${retentionDays.raw} DAY SETTINGS materialize_ttl_after_modify = 0`,
  ];
  for (const aggregate of AGGREGATES) {
    const ttl = `time + INTERVAL ${retentionDays[aggregate.retention]} DAY`;
    statements.push(
      `CREATE TABLE IF NOT EXISTS ${db}.${aggregate.table} (
        time ${aggregate.timeType},
        workspace_id String,
        key_space_id String,
        identity_id String,
        external_id String,
        key_id String,
        outcome LowCardinality(String),
        tags Array(String),
        count SimpleAggregateFunction(sum, Int64),
        spent_credits SimpleAggregateFunction(sum, Int64),
        latency_avg AggregateFunction(avg, Float64),
        latency_p75 AggregateFunction(quantileTDigest(0.75), Float64),
        latency_p99 AggregateFunction(quantileTDigest(0.99), Float64)
      ) ENGINE = AggregatingMergeTree
      PARTITION BY ${aggregate.partition}
      ORDER BY (workspace_id, time, ${DIMENSIONS.replace("workspace_id, ", "")})
      TTL ${ttl}
      SETTINGS ttl_only_drop_parts = 1`,
      `ALTER TABLE ${db}.${aggregate.table} MODIFY TTL ${ttl} SETTINGS materialize_ttl_after_modify = 0`,
      // The bucket is computed in a subquery so that naming it `time` does not shadow the raw column it is made of.
      `CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.${aggregate.view} TO ${db}.${aggregate.table} AS
      SELECT bucket AS time, ${DIMENSIONS},
        toInt64(count()) AS count,
        toInt64(sum(spent_credits)) AS spent_credits,
        avgState(latency) AS latency_avg,
        quantileTDigestState(0.75)(latency) AS latency_p75,
        quantileTDigestState(0.99)(latency) AS latency_p99
      FROM (SELECT ${aggregate.bucket} AS bucket, ${DIMENSIONS}, spent_credits, latency FROM ${db}.key_verifications_v1)
      GROUP BY bucket, ${DIMENSIONS}`,
    );
  }
  return statements;
}
