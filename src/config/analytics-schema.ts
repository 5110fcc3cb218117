import { type Static, Type } from "typebox";
import { describedPattern } from "../http/patterns.js";
import { Strict } from "../http/schemas.js";
import { ANALYTICS_DEFAULTS as AD } from "./defaults.js";
import { EMPTY, HTTP_URL_PATTERN } from "./schema-parts.js";

const Days = (fallback: number) => Type.Integer({ minimum: 1, maximum: 3_650, default: fallback });

export const AnalyticsConfigSchema = Strict(
  {
    /** Where verification events go and analytics.getVerifications reads: in-process chDB, a ClickHouse server, or nowhere. */
    engine: Type.Union([Type.Literal("embedded"), Type.Literal("clickhouse"), Type.Literal("off")], { default: AD.engine }),
    /** Data directory of the embedded engine, relative to the working directory. Kept across restarts. */
    path: Type.String({ minLength: 1, default: AD.path }),
    clickhouse: Strict(
      {
        url: Type.Optional(Type.String({ pattern: HTTP_URL_PATTERN })),
        database: Type.String({
          minLength: 1,
          maxLength: 64,
          pattern: describedPattern("^[A-Za-z_][A-Za-z0-9_]*$", "start with a letter or _ and contain only letters, digits and _"),
          default: AD.clickhouseDatabase,
        }),
        username: Type.String({ minLength: 1, default: AD.clickhouseUsername }),
        password: Type.String({ default: "" }),
        requestTimeoutMs: Type.Integer({ minimum: 100, maximum: 600_000, default: AD.clickhouseRequestTimeoutMs }),
      },
      EMPTY,
    ),
    /** Written into the `region` column of every event this instance records. */
    region: Type.String({ maxLength: 64, default: AD.region }),
    buffer: Strict(
      {
        /** Events held in memory at most; beyond it new events are dropped and counted. */
        maxEvents: Type.Integer({ minimum: 1, maximum: 10_000_000, default: AD.buffer.maxEvents }),
        /** A batch is written as soon as this many events wait. */
        batchSize: Type.Integer({ minimum: 1, maximum: 1_000_000, default: AD.buffer.batchSize }),
        /** Whatever waits is written at least this often. */
        flushIntervalMs: Type.Integer({ minimum: 10, maximum: 600_000, default: AD.buffer.flushIntervalMs }),
      },
      EMPTY,
    ),
    /** How long each table keeps rows (TTL), and how far back queries may look. */
    retentionDays: Strict(
      {
        raw: Days(AD.retentionDays.raw),
        perMinute: Days(AD.retentionDays.perMinute),
        perHour: Days(AD.retentionDays.perHour),
        perDay: Days(AD.retentionDays.perDay),
        perMonth: Days(AD.retentionDays.perMonth),
        /** The audit log (audit_logs_v1). */
        audit: Days(AD.retentionDays.audit),
      },
      EMPTY,
    ),
    query: Strict(
      {
        maxExecutionMs: Type.Integer({ minimum: 10, maximum: 3_600_000, default: AD.query.maxExecutionMs }),
        maxMemoryBytes: Type.Integer({ minimum: 1_000_000, maximum: 1_000_000_000_000, default: AD.query.maxMemoryBytes }),
        /** Rows returned at most; a larger or missing LIMIT is clamped to it. */
        maxResultRows: Type.Integer({ minimum: 1, maximum: 10_000_000, default: AD.query.maxResultRows }),
        maxResultBytes: Type.Integer({ minimum: 1_024, maximum: 1024 * 1024 * 1024, default: AD.query.maxResultBytes }),
        maxRowsToRead: Type.Integer({ minimum: 1, maximum: 1_000_000_000_000, default: AD.query.maxRowsToRead }),
        /** Analytics queries this instance runs at once; more wait their turn. */
        maxConcurrent: Type.Integer({ minimum: 1, maximum: 64, default: AD.query.maxConcurrent }),
      },
      EMPTY,
    ),
    /** Per workspace, in fixed windows; shared by every instance when Redis is configured. */
    quota: Strict(
      {
        windowMs: Type.Integer({ minimum: 1_000, maximum: 86_400_000, default: AD.quota.windowMs }),
        queries: Type.Integer({ minimum: 1, maximum: 100_000_000, default: AD.quota.queries }),
        executionMs: Type.Integer({ minimum: 1, maximum: 86_400_000_000, default: AD.quota.executionMs }),
      },
      EMPTY,
    ),
  },
  EMPTY,
);

export type AnalyticsConfig = Static<typeof AnalyticsConfigSchema>;
