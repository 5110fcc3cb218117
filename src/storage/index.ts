import type { CircuitBreaker } from "../lib/circuit-breaker.js";
import { type Clock, systemClock } from "../lib/clock.js";
import { defined } from "../lib/defined.js";
import type { Broadcast, StoreHealth, Stores } from "./interfaces.js";
import { MemoryAnalyticsQuotaStore } from "./memory/analytics-quota-store.js";
import { MemoryApiStore } from "./memory/api-store.js";
import { MemoryDashboardSessionStore } from "./memory/dashboard-session-store.js";
import { MemoryIdentityStore } from "./memory/identity-store.js";
import { MemoryKeyStore } from "./memory/key-store.js";
import { MemoryPermissionStore } from "./memory/permission-store.js";
import { MemoryPortalSessionStore, MemoryPortalStore } from "./memory/portal-store.js";
import { creditLedger, MemoryRatelimitCounterStore } from "./memory/ratelimit-counter-store.js";
import { MemoryRatelimitNamespaceStore } from "./memory/ratelimit-namespace-store.js";
import { MemoryRoleStore } from "./memory/role-store.js";
import { MemoryRootKeyStore } from "./memory/root-key-store.js";
import { MemoryRouteStore } from "./memory/route-store.js";
import { MemoryWebhookOutbox } from "./memory/webhook-outbox.js";
import { MemoryWebhookStore } from "./memory/webhook-store.js";
import { SharedCounters } from "./ratelimit/shared-counters.js";
import { RedisAnalyticsQuotaStore } from "./redis/analytics-quota-store.js";
import { RedisApiStore } from "./redis/api-store.js";
import { RedisBroadcast } from "./redis/broadcast.js";
import { connectRedis } from "./redis/connection.js";
import type { StoreLog } from "./redis/credit-reconciler.js";
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
import { RedisWebhookOutbox } from "./redis/webhook-outbox.js";
import { RedisWebhookStore } from "./redis/webhook-store.js";

export interface StoreOptions {
  /** Time for the breaker and for in-memory counters (tests inject one); the system clock otherwise. */
  clock?: Clock;
  /** ratelimit.reservations: whether Redis counters may reserve units for this instance (default true). */
  ratelimitReservations?: boolean;
  /** Where Redis stores report work they do in the background (reconciling credits); silent without one. */
  log?: StoreLog;
}

export function createMemoryStores(options: StoreOptions = {}): Stores {
  const keys = new MemoryKeyStore();
  const identities = new MemoryIdentityStore();
  return {
    kind: "memory",
    rootKeys: new MemoryRootKeyStore(),
    apis: new MemoryApiStore(),
    keys,
    permissions: new MemoryPermissionStore(),
    roles: new MemoryRoleStore(),
    identities,
    ratelimitNamespaces: new MemoryRatelimitNamespaceStore(),
    // Counters and balances live side by side so that limits and credits are decided in one step.
    ratelimitCounters: new MemoryRatelimitCounterStore(options.clock ?? systemClock, creditLedger(keys, identities)),
    analyticsQuota: new MemoryAnalyticsQuotaStore(),
    dashboardSessions: new MemoryDashboardSessionStore(options.clock ?? systemClock),
    portals: new MemoryPortalStore(),
    portalSessions: new MemoryPortalSessionStore(options.clock ?? systemClock),
    routes: new MemoryRouteStore(),
    webhooks: new MemoryWebhookStore(options.clock ?? systemClock),
    webhookOutbox: new MemoryWebhookOutbox(),
    health: MEMORY_HEALTH,
    broadcast: NO_OTHER_INSTANCES,
    close: async () => {},
  };
}

/** In-memory stores always answer. */
const MEMORY_HEALTH: StoreHealth = {
  state: "closed",
  onStateChange: () => {},
  check: async () => {},
  observeCommands: () => () => {},
};

/** In-memory stores serve one instance: there is nobody to tell. */
const NO_OTHER_INSTANCES: Broadcast = {
  publish: async () => {},
  subscribe: async () => async () => {},
};

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

/** Redis stores when `storage.redis` is configured, in-memory stores otherwise. */
export async function openStores(redisSettings: RedisStoreSettings | undefined, options: StoreOptions = {}): Promise<Stores> {
  if (!redisSettings) return createMemoryStores(options);
  const redis = await connectRedis(redisSettings);
  return createRedisStores(redis, redisSettings.prefix, true, {
    ...options,
    breaker: redisSettings.breaker,
    ...defined({ replicaWait: redisSettings.waitForReplicas }),
  });
}
