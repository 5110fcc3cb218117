import { type Static, Type } from "typebox";
import { RATELIMIT_FAIL_MODES } from "../domain/ratelimit/limiter.js";
import { describedPattern } from "../http/patterns.js";
import { Strict } from "../http/schemas.js";
import { DEFAULT_IPV6_PREFIX_LENGTH } from "../lib/address-prefix.js";
import { DEFAULTS } from "./defaults.js";
import { EMPTY } from "./schema-parts.js";

// storage.redis, the shared store, and ratelimit: what the rate limiter does with Redis, and without it.

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
    /** A per-address limit (identifier `ip`, `remoteIp`) counts an IPv6 client by this prefix of its address; IPv4 whole. */
    ipv6PrefixLength: Type.Integer({ minimum: 1, maximum: 128, default: DEFAULT_IPV6_PREFIX_LENGTH }),
  },
  EMPTY,
);

export type RedisConfig = Static<typeof RedisConfigSchema>;
