import type { CircuitBreaker } from "../lib/circuit-breaker.js";
import { systemClock } from "../lib/clock.js";
import { defined } from "../lib/defined.js";
import type { StoreOptions } from "./index.js";
import type { Stores } from "./interfaces.js";
import { SharedCounters } from "./ratelimit/shared-counters.js";
import { RedisAnalyticsQuotaStore } from "./redis/analytics-quota-store.js";
import { RedisApiStore } from "./redis/api-store.js";
import { RedisAuditOutbox } from "./redis/audit-outbox.js";
import { RedisBroadcast } from "./redis/broadcast.js";
import { connectRedis } from "./redis/connection.js";
import { defineCreditCommands } from "./redis/credit-scripts.js";
import { RedisDashboardSessionStore } from "./redis/dashboard-session-store.js";
import { type BreakerSettings, DEFAULT_BREAKER, guardedClient, RedisGuard, redisBreaker, redisHealth } from "./redis/guard.js";
import { RedisIdentityStore } from "./redis/identity-store.js";
import { RedisKeyStore } from "./redis/key-store.js";
import { createRedisKeys } from "./redis/keys.js";
import { RedisPermissionStore } from "./redis/permission-store.js";
import { RedisPortalSessionStore, RedisPortalStore } from "./redis/portal-store.js";
import { MAX_KEYS_PER_EXECUTION, RedisRatelimitCounterStore } from "./redis/ratelimit-counter-store.js";
import { RedisRatelimitNamespaceStore } from "./redis/ratelimit-namespace-store.js";
import { type ReplicaWaitSettings, waitingForReplicas } from "./redis/replica-wait.js";
import { RedisRoleStore } from "./redis/role-store.js";
import { RedisRootKeyStore } from "./redis/root-key-store.js";
import { RedisRouteStore } from "./redis/route-store.js";
import { type ConnectionSettings, closeClient, type RedisClient, type RedisTarget } from "./redis/topology.js";
import { RedisUsageReportStore } from "./redis/usage-report-store.js";
import { RedisWebhookOutbox } from "./redis/webhook-outbox.js";
import { RedisWebhookStore } from "./redis/webhook-store.js";

// Stores kept in Redis: imported by openStores only when storage.redis is configured, so that ioredis is loaded
// only by a keygate that uses it.

/** Stores kept in Redis, with what tests and operator tools look at besides the ports. */
export interface RedisBackedStores extends Stores {
  readonly kind: "redis";
  readonly redis: RedisClient;
  readonly prefix: string;
  /** The counters' store under the policies of `ratelimitCounters`: one script execution per batch. */
  readonly ratelimitBatches: RedisRatelimitCounterStore;
  /** The circuit breaker that guards every Redis call; `health` reports its state. */
  readonly breaker: CircuitBreaker;
}

/** A Redis deployment and how keygate uses it: the configuration's `storage.redis`. */
export type RedisStoreSettings = RedisTarget &
  ConnectionSettings & { prefix: string; breaker: BreakerSettings; waitForReplicas?: ReplicaWaitSettings | undefined };

/** Stores over an open connection. `ownsConnection`: close() also quits the connection. */
export function createRedisStores(
  redis: RedisClient,
  prefix: string,
  ownsConnection: boolean,
  options: StoreOptions & {
    breaker?: BreakerSettings;
    replicaWait?: ReplicaWaitSettings;
    reconcileRetryMs?: number;
    maxPendingReconciliations?: number;
  } = {},
): RedisBackedStores {
  const keys = createRedisKeys(prefix);
  const clock = options.clock ?? systemClock;
  // One breaker per connection, shared by every store: when Redis stops answering, the rate limiter falls back at
  // once for every namespace, and every other read or write fails fast with StoreUnavailableError.
  const guard = new RedisGuard(redisBreaker(redis, options.breaker ?? DEFAULT_BREAKER, clock));
  // Management writes may wait for replicas; rate limit counters and credit spending never do.
  const writer = options.replicaWait ? waitingForReplicas(redis, options.replicaWait) : redis;
  const guarded = guardedClient(writer, guard);
  defineCreditCommands(redis);
  const ratelimitBatches = new RedisRatelimitCounterStore(
    redis,
    keys,
    guard,
    clock,
    defined({ log: options.log, reconcileRetryMs: options.reconcileRetryMs, maxPendingReconciliations: options.maxPendingReconciliations }),
  );
  const ratelimitCounters = new SharedCounters(ratelimitBatches, clock, {
    reservations: options.ratelimitReservations ?? true,
    maxKeysPerBatch: MAX_KEYS_PER_EXECUTION,
  });
  // Counts seen and units reserved before an outage may be gone if Redis restarted without its data.
  guard.breaker.onStateChange((state) => {
    if (state === "closed") ratelimitCounters.forget();
  });
  let closed = false;
  return {
    kind: "redis",
    redis,
    prefix,
    rootKeys: new RedisRootKeyStore(guarded, keys),
    apis: new RedisApiStore(guarded, keys),
    keys: new RedisKeyStore(guarded, keys),
    permissions: new RedisPermissionStore(guarded, keys),
    roles: new RedisRoleStore(guarded, keys),
    identities: new RedisIdentityStore(guarded, keys),
    ratelimitNamespaces: new RedisRatelimitNamespaceStore(writer, keys, guard),
    ratelimitCounters,
    ratelimitBatches,
    breaker: guard.breaker,
    analyticsQuota: new RedisAnalyticsQuotaStore(guarded, keys),
    dashboardSessions: new RedisDashboardSessionStore(guarded, keys),
    portals: new RedisPortalStore(guarded, keys),
    portalSessions: new RedisPortalSessionStore(guarded, keys),
    routes: new RedisRouteStore(guarded, keys),
    webhooks: new RedisWebhookStore(guarded, keys),
    webhookOutbox: new RedisWebhookOutbox(guardedClient(redis, guard), keys),
    usageReports: new RedisUsageReportStore(guarded, keys),
    auditOutbox: new RedisAuditOutbox(redis, guard, keys, options.replicaWait),
    health: redisHealth(redis, guard),
    broadcast: new RedisBroadcast(redis, prefix),
    close: async () => {
      if (closed) return;
      closed = true;
      // Calls that may have spent credits and got no answer are settled while the connection is still open.
      await ratelimitBatches.close();
      guard.breaker.stop();
      if (ownsConnection) await closeClient(redis);
    },
  };
}

/** Connects to the configured Redis and opens the stores over that connection, which their close() quits. */
export async function openRedisStores(redisSettings: RedisStoreSettings, options: StoreOptions = {}): Promise<RedisBackedStores> {
  const redis = await connectRedis(redisSettings);
  return createRedisStores(redis, redisSettings.prefix, true, {
    ...options,
    breaker: redisSettings.breaker,
    ...defined({ replicaWait: redisSettings.waitForReplicas }),
  });
}
