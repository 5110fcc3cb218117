import { DEFAULT_CACHE_MAX_BYTES } from "../cache/cache-budget.js";
import { DEFAULT_DOCS_URL } from "../errors/catalogue.js";
import { DEFAULT_BREAKER } from "../storage/redis/guard.js";

/** The named defaults the configuration schema fills in, and the workspace keygate creates on first start. */
export const DEFAULTS = {
  host: "0.0.0.0",
  port: 8080,
  bodyLimitBytes: 10 * 1024 * 1024,
  /** A /v2 request's body must have arrived within this long of keygate starting to read it. */
  requestTimeoutMs: 30_000,
  /** Node's own default: a request's headers must have arrived within this long of its first byte. */
  headersTimeoutMs: 60_000,
  /** How long a SIGTERM leaves requests in flight to finish and buffers to be written before keygate exits anyway. */
  shutdownTimeoutMs: 10_000,
  logLevel: "info",
  redisPrefix: "keygate",
  redisCommandTimeoutMs: 500,
  redisConnectTimeoutMs: 5_000,
  /**
   * How long a management write waits for its replicas when storage.redis.waitForReplicas asks for any: shorter than
   * the command deadline, which the WAIT is subject to as any command.
   */
  redisReplicaWaitMs: 400,
  /** Consecutive failed or late Redis calls after which the rate limiter stops calling Redis for a while. */
  redisBreakerFailureThreshold: DEFAULT_BREAKER.failureThreshold,
  /** How long the rate limiter leaves Redis alone before probing it again (PING, in the background). */
  redisBreakerOpenMs: DEFAULT_BREAKER.openMs,
  /**
   * What the rate limiter answers while Redis is unavailable. `local` keeps limits enforced on each instance's own
   * counters: an outage neither refuses all traffic (`closed`) nor removes all protection (`open`).
   */
  ratelimitFail: "local",
  docsUrl: DEFAULT_DOCS_URL,
  /** What the in-process caches (key views, root keys, namespaces) may hold in all. */
  cacheMaxBytes: DEFAULT_CACHE_MAX_BYTES,
  bootstrapWorkspaceId: "ws_default",
} as const;

/**
 * Analytics defaults. Retention follows the hosted Unkey tables' TTLs; query limits follow its per-workspace
 * ClickHouse user, except the result rows, which are returned in one JSON response here and so are kept modest.
 */
export const ANALYTICS_DEFAULTS = {
  engine: "embedded",
  path: "./data/analytics",
  clickhouseDatabase: "keygate",
  clickhouseUsername: "default",
  clickhouseRequestTimeoutMs: 30_000,
  region: "",
  // Few, large batches: every insert into the embedded engine has a fixed cost, and fewer parts mean fewer merges.
  // Events then show up in queries within 5 s; at most about 40 MB are held.
  buffer: { maxEvents: 150_000, batchSize: 50_000, flushIntervalMs: 5_000 },
  retentionDays: { raw: 90, perMinute: 90, perHour: 90, perDay: 365, perMonth: 1_095, audit: 365 },
  query: {
    maxExecutionMs: 10_000,
    maxMemoryBytes: 1_000_000_000,
    maxResultRows: 10_000,
    maxResultBytes: 16 * 1024 * 1024,
    maxRowsToRead: 1_000_000_000,
    maxConcurrent: 2,
  },
  quota: { windowMs: 3_600_000, queries: 1_000, executionMs: 1_800_000 },
} as const;
