import { type Static, Type } from "typebox";
import { MIGRATION_SCHEMES } from "../domain/keys/key-migrations.js";
import { RATELIMIT_FAIL_MODES } from "../domain/ratelimit/limiter.js";
import { DEFAULT_DOCS_URL } from "../errors/catalogue.js";
import { GatewaySettingsSchema, RouteSchema } from "../gateway/route-config.js";
import { describedPattern } from "../http/patterns.js";
import { EXTERNAL_ID_PATTERN, ID_PATTERN, NAME_PATTERN, Strict, StringEnum } from "../http/schemas.js";
import { MAX_IP_ALLOWLIST_ENTRIES } from "../lib/ip-allowlist.js";
import { DEFAULT_BREAKER } from "../storage/redis/guard.js";

/**
 * The configuration file's schema. Fields with a `default` may be left out of the file; Ajv fills them in
 * (nested objects included), so the static type below is the fully resolved configuration.
 * docs/configuration.md describes every field; a test checks that the example file validates.
 */
export const DEFAULTS = {
  host: "0.0.0.0",
  port: 8080,
  bodyLimitBytes: 10 * 1024 * 1024,
  /** A /v2 request's body must have arrived within this long of keygate starting to read it. */
  requestTimeoutMs: 30_000,
  /** Node's own default: a request's headers must have arrived within this long of its first byte. */
  headersTimeoutMs: 60_000,
  logLevel: "info",
  redisPrefix: "keygate",
  redisCommandTimeoutMs: 500,
  redisConnectTimeoutMs: 5_000,
  /** How long a management write waits for its replicas when storage.redis.waitForReplicas asks for any. */
  redisReplicaWaitMs: 1_000,
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
  retentionDays: { raw: 90, perMinute: 90, perHour: 90, perDay: 365, perMonth: 1_095 },
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

const WorkspaceId = Type.String({ minLength: 1, maxLength: 255, pattern: ID_PATTERN });
const HTTP_URL_PATTERN = describedPattern("^https?://", "be an http:// or https:// URL");

const EMPTY = { default: {} };

export const ServerConfigSchema = Strict(
  {
    host: Type.String({ minLength: 1, default: DEFAULTS.host }),
    port: Type.Integer({ minimum: 0, maximum: 65535, default: DEFAULTS.port }),
    bodyLimit: Type.Integer({ minimum: 1024, maximum: 1024 * 1024 * 1024, default: DEFAULTS.bodyLimitBytes }),
    /** How long a /v2 request's body may take to arrive (408 and closed after that). The gateway's uploads have no such limit. */
    requestTimeoutMs: Type.Integer({ minimum: 100, maximum: 3_600_000, default: DEFAULTS.requestTimeoutMs }),
    /** How long any request's headers may take to arrive (408 and closed after that), on /v2 and the gateway alike. */
    headersTimeoutMs: Type.Integer({ minimum: 100, maximum: 3_600_000, default: DEFAULTS.headersTimeoutMs }),
    /**
     * Processes serving requests (node:cluster): a number, or "auto" for one per available core (one with in-memory
     * stores). More than one needs Redis stores: in-memory stores would be per process.
     */
    // Checked after the schema (checkConsistency), for one clear message rather than one per branch of a union.
    workers: Type.Unsafe<number | "auto">(Type.Union([Type.Integer(), Type.String()], { default: 1 })),
  },
  EMPTY,
);

export const LoggingConfigSchema = Strict(
  {
    level: StringEnum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], { default: DEFAULTS.logLevel }),
    /**
     * The access log: one structured line per request (request id, face, route or procedure, status, duration, key
     * id, client address). false (the default: the gateway's hot path does not pay for it unasked), true, or the
     * fraction of requests to log (0.01: one in a hundred, chosen at random).
     */
    requests: Type.Union([Type.Boolean(), Type.Number({ exclusiveMinimum: 0, maximum: 1 })], { default: false }),
  },
  EMPTY,
);

export const MetricsConfigSchema = Strict(
  {
    /** Prometheus metrics at GET /metrics; false serves none and counts nothing. */
    enabled: Type.Boolean({ default: true }),
    /** When set, GET /metrics needs `Authorization: Bearer <token>`. */
    token: Type.Optional(Type.String({ minLength: 16 })),
    /** When set, /metrics is served on this port of server.host only, and not on the main port. */
    port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65_535 })),
  },
  EMPTY,
);

const RedisUrl = Type.String({ pattern: describedPattern("^rediss?://", "be a redis:// or rediss:// URL") });

/** Exactly one of `url`, `cluster` or `sentinel` names the Redis deployment (checked after the schema). */
export const RedisConfigSchema = Strict({
  /** One Redis server. */
  url: Type.Optional(RedisUrl),
  /** A Redis Cluster: a few of its nodes; the client discovers the rest. Credentials and TLS come from these URLs. */
  cluster: Type.Optional(
    Strict({
      nodes: Type.Array(RedisUrl, { minItems: 1, maxItems: 100 }),
    }),
  ),
  /** A master and its replicas watched by Redis Sentinel; keygate follows the master the sentinels name. */
  sentinel: Type.Optional(
    Strict({
      /** The master's name in the sentinels' configuration (`sentinel monitor <name> …`). */
      name: Type.String({ minLength: 1, maxLength: 255 }),
      /** Credentials in these URLs authenticate to the sentinels; rediss:// means TLS to sentinels and data servers. */
      sentinels: Type.Array(RedisUrl, { minItems: 1, maxItems: 100 }),
      /** Credentials of the master and replicas, when they need any. */
      masterUsername: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
      masterPassword: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    }),
  ),
  /** Every key keygate writes starts with `<prefix>:`, so several deployments can share one Redis. */
  prefix: Type.String({
    minLength: 1,
    maxLength: 64,
    pattern: describedPattern("^[A-Za-z0-9_.:-]+$", "contain only letters, digits and the characters _ . : -"),
    default: DEFAULTS.redisPrefix,
  }),
  /** Deadline for each Redis command; a slower answer counts as a failure. */
  commandTimeoutMs: Type.Integer({ minimum: 10, maximum: 60_000, default: DEFAULTS.redisCommandTimeoutMs }),
  /**
   * Management writes (keys, APIs, roles, permissions, identities, root keys, namespaces, overrides) are
   * acknowledged only once this many replicas confirmed them (Redis WAIT), so a failover cannot lose them.
   */
  waitForReplicas: Type.Optional(
    Strict({
      replicas: Type.Integer({ minimum: 1, maximum: 10 }),
      timeoutMs: Type.Integer({ minimum: 1, maximum: 60_000, default: DEFAULTS.redisReplicaWaitMs }),
    }),
  ),
  /** How long start-up waits for Redis before giving up. */
  connectTimeoutMs: Type.Integer({ minimum: 100, maximum: 300_000, default: DEFAULTS.redisConnectTimeoutMs }),
  /** The circuit breaker in front of the rate limiter's Redis calls. */
  breaker: Strict(
    {
      failureThreshold: Type.Integer({ minimum: 1, maximum: 1_000, default: DEFAULTS.redisBreakerFailureThreshold }),
      openMs: Type.Integer({ minimum: 50, maximum: 600_000, default: DEFAULTS.redisBreakerOpenMs }),
    },
    EMPTY,
  ),
});

export const RatelimitConfigSchema = Strict(
  {
    /** closed: refuse with 503; open: allow; local: decide on this instance's own counters. */
    fail: Type.Unsafe<(typeof RATELIMIT_FAIL_MODES)[number]>({
      type: "string",
      enum: [...RATELIMIT_FAIL_MODES],
      default: DEFAULTS.ratelimitFail,
    }),
    /** Whether an instance may admit calls from units of a large limit it reserved in Redis ahead (docs/operations.md). */
    reservations: Type.Boolean({ default: true }),
  },
  EMPTY,
);

export const RootKeyConfigSchema = Strict({
  /** The plaintext root key. Give either this or `hash`. */
  key: Type.Optional(Type.String({ minLength: 8, maxLength: 512 })),
  /** base64 SHA-256 of the root key, so the file need not hold the secret (`printf %s "$KEY" | openssl dgst -sha256 -binary | base64`). */
  hash: Type.Optional(
    Type.String({ pattern: describedPattern("^[A-Za-z0-9+/]{43}=$", "be a SHA-256 hash in base64 (44 characters ending in =)") }),
  ),
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  workspaceId: WorkspaceId,
  permissions: Type.Array(Type.String({ minLength: 1, maxLength: 512 }), { minItems: 1, maxItems: 1000 }),
  /** Unix ms after which the key is refused. */
  expires: Type.Optional(Type.Integer({ minimum: 0 })),
});

export const DeclaredApiSchema = Strict({
  id: Type.String({ minLength: 8, maxLength: 255, pattern: ID_PATTERN }),
  name: Type.String({ minLength: 3, maxLength: 255, pattern: NAME_PATTERN }),
  workspaceId: WorkspaceId,
  /** When true, apis.deleteApi answers 412 protected_resource. */
  deleteProtection: Type.Boolean({ default: false }),
  /**
   * Addresses and CIDR ranges keys of the API may be verified from (checked after the schema). When given it
   * replaces the API's allowlist at every start-up, [] removing it; when absent, keygate.setApiIpAllowlist decides.
   */
  ipAllowlist: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: MAX_IP_ALLOWLIST_ENTRIES })),
});

/** A key migration keys.migrateKeys may name (docs/migration.md): where the keys go and how the old system hashed them. */
export const MigrationSchema = Strict({
  /** What keys.migrateKeys and keys.verifyKey call it (`migrationId`); unique within the workspace. */
  id: Type.String({ minLength: 3, maxLength: 255, pattern: EXTERNAL_ID_PATTERN }),
  workspaceId: WorkspaceId,
  scheme: Type.Unsafe<(typeof MIGRATION_SCHEMES)[number]>({ type: "string", enum: [...MIGRATION_SCHEMES] }),
});

const Days = (fallback: number) => Type.Integer({ minimum: 1, maximum: 3_650, default: fallback });
const AD = ANALYTICS_DEFAULTS;

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

/** The dashboard (docs/operations.md#dashboard): where it is served and how long its sessions last. */
export const DashboardConfigSchema = Strict(
  {
    /** Serve the dashboard and its session endpoints; false serves neither. */
    enabled: Type.Boolean({ default: true }),
    /** Where: one or more path segments, no trailing slash (checked after the schema: not under /v2, not /metrics). */
    path: Type.String({
      minLength: 2,
      maxLength: 100,
      pattern: describedPattern(
        "^(/[a-z0-9_-]+)+$",
        "be an absolute path of lower-case letters, digits, _ and - segments, without a trailing /",
      ),
      default: "/dashboard",
    }),
    /** A session not used for this long ends. */
    sessionIdleTimeoutMs: Type.Integer({ minimum: 60_000, maximum: 86_400_000, default: 1_800_000 }),
    /** A session ends this long after sign-in, however it is used. */
    sessionAbsoluteTimeoutMs: Type.Integer({ minimum: 60_000, maximum: 2_592_000_000, default: 43_200_000 }),
  },
  EMPTY,
);

export const ConfigSchema = Strict({
  server: ServerConfigSchema,
  logging: LoggingConfigSchema,
  metrics: MetricsConfigSchema,
  storage: Strict({ redis: Type.Optional(RedisConfigSchema) }, EMPTY),
  ratelimit: RatelimitConfigSchema,
  errors: Strict({ docsUrl: Type.String({ pattern: HTTP_URL_PATTERN, default: DEFAULTS.docsUrl }) }, EMPTY),
  /** Key-encryption key for recoverable keys: 32 bytes, base64. */
  vault: Strict({ key: Type.Optional(Type.String({ minLength: 1 })) }, EMPTY),
  rootKeys: Type.Array(RootKeyConfigSchema, { default: [] }),
  apis: Type.Array(DeclaredApiSchema, { default: [] }),
  /** Imports from other systems that keys.migrateKeys may name. */
  migrations: Type.Array(MigrationSchema, { default: [] }),
  analytics: AnalyticsConfigSchema,
  /** The gateway: requests matching a route are verified and, when allowed, proxied to its upstream. */
  routes: Type.Array(RouteSchema, { default: [] }),
  gateway: GatewaySettingsSchema,
  dashboard: DashboardConfigSchema,
});

export type KeygateConfig = Static<typeof ConfigSchema>;
export type RedisConfig = Static<typeof RedisConfigSchema>;
export type RootKeyConfig = Static<typeof RootKeyConfigSchema>;
export type DeclaredApi = Static<typeof DeclaredApiSchema>;
export type AnalyticsConfig = Static<typeof AnalyticsConfigSchema>;
export type DashboardConfig = Static<typeof DashboardConfigSchema>;

/** Exported for tests and tools that check identifier shapes the same way the config does. */
export const PATTERNS = { id: ID_PATTERN, externalId: EXTERNAL_ID_PATTERN, name: NAME_PATTERN } as const;
