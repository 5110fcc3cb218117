import { type Clock, systemClock } from "../lib/clock.js";
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
import { MemoryUsageReportStore } from "./memory/usage-report-store.js";
import { MemoryWebhookOutbox } from "./memory/webhook-outbox.js";
import { MemoryWebhookStore } from "./memory/webhook-store.js";
import type { StoreLog } from "./redis/credit-reconciler.js";
import type { RedisStoreSettings } from "./redis-stores.js";

export type { RedisBackedStores, RedisStoreSettings } from "./redis-stores.js";

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
    usageReports: new MemoryUsageReportStore(options.clock ?? systemClock),
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

/**
 * Redis stores when `storage.redis` is configured, in-memory stores otherwise. The Redis stores (and ioredis) are
 * loaded only when configured: a keygate on in-memory stores never needs them.
 */
export async function openStores(redisSettings: RedisStoreSettings | undefined, options: StoreOptions = {}): Promise<Stores> {
  if (!redisSettings) return createMemoryStores(options);
  const { openRedisStores } = await import("./redis-stores.js");
  return openRedisStores(redisSettings, options);
}
