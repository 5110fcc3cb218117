import { type AnalyticsRuntime, disabledAnalytics } from "./analytics/index.js";
import { type CacheBudget, type CacheSample, cacheBudget } from "./cache/cache-budget.js";
import { CachedRootKeyStore, rootKeyBytes } from "./cache/cached-root-key-store.js";
import { InvalidationBus } from "./cache/invalidation-bus.js";
import { KeyViewCache } from "./cache/key-view-cache.js";
import { CachedNamespaceDirectory } from "./cache/ratelimit-namespace-directory.js";
import { SwrCache } from "./cache/swr-cache.js";
import type { KeygateConfig } from "./config/schema.js";
import { AnalyticsService } from "./domain/analytics/analytics-service.js";
import { ApiService } from "./domain/apis/api-service.js";
import { AuditLogService } from "./domain/audit/audit-log-service.js";
import { type AuditTrail, SinkAuditTrail } from "./domain/audit/audit-trail.js";
import { DashboardSessionService } from "./domain/dashboard/session-service.js";
import { IdentityService } from "./domain/identities/identity-service.js";
import { KeyAccessService } from "./domain/keys/key-access-service.js";
import { generateKey } from "./domain/keys/key-material.js";
import { KeyMigrationService } from "./domain/keys/key-migrations.js";
import { KeySecrets } from "./domain/keys/key-secrets.js";
import { KeyService } from "./domain/keys/key-service.js";
import { LiveKeys } from "./domain/keys/live-keys.js";
import type { NoticeSink } from "./domain/notices.js";
import { type Observer, UNOBSERVED } from "./domain/observer.js";
import { Portals } from "./domain/portals/portals.js";
import { Limiter } from "./domain/ratelimit/limiter.js";
import { RatelimitService } from "./domain/ratelimit/ratelimit-service.js";
import { RbacService } from "./domain/rbac/rbac-service.js";
import { RootKeyService } from "./domain/root-keys/root-key-service.js";
import type { CompiledRoute, DecisionRoute } from "./domain/routes/route-compiler.js";
import { type RouteChangeNotifier, RouteService } from "./domain/routes/route-service.js";
import type { UpstreamTargetHealth } from "./domain/routes/route-views.js";
import { UsageService } from "./domain/usage/usage-service.js";
import { loadKeyView } from "./domain/verification/key-view.js";
import { VerificationService } from "./domain/verification/verification-service.js";
import { openApiDocumentProblems } from "./gateway/openapi-documents.js";
import { ROUTE_RULES } from "./gateway/route-table.js";
import { ApiUpstreamGuard } from "./gateway/upstream-guard.js";
import type { Clock } from "./lib/clock.js";
import { defined } from "./lib/defined.js";
import { Vault } from "./lib/vault.js";
import type { Stores } from "./storage/interfaces.js";
import { MemoryRatelimitCounterStore } from "./storage/memory/ratelimit-counter-store.js";
import type { RootKeyRecord } from "./storage/records.js";
import { isStoreUnavailable } from "./storage/unavailable.js";
import { createWebhooks, type Webhooks, type WebhookWiringOptions } from "./webhook-wiring.js";

/** Everything the HTTP layer and the CLI call into. Built once per process from the stores and the config. */
export interface Services {
  /** Carries cache invalidations to this instance's caches and, with Redis, to every other instance. */
  readonly invalidations: InvalidationBus;
  /** Each in-process cache's entries, bytes and evictions (the metrics read them when scraped). */
  readonly caches: () => CacheSample[];
  readonly rootKeys: RootKeyService;
  readonly dashboardSessions: DashboardSessionService;
  readonly apis: ApiService;
  /** The gateway's routes and their policies, as data (keygate.*Route, gateway.*). */
  readonly routes: RouteService;
  readonly keys: KeyService;
  /** keys.migrateKeys and the CLI's import: keys brought from another system, under the migrations configured. */
  readonly keyMigrations: KeyMigrationService;
  /** What each key may do: its direct permissions and its roles. */
  readonly keyAccess: KeyAccessService;
  readonly rbac: RbacService;
  readonly identities: IdentityService;
  /** Namespace rate limits and overrides (ratelimit.*, the gateway's namespace limits). */
  readonly ratelimit: RatelimitService;
  /** The one verification path: keys.verifyKey and the gateway. */
  readonly verification: VerificationService;
  /** The analytics procedures, and `analytics.sinks`, where verification, rate limiting and the gateway record their events. */
  readonly analytics: AnalyticsService;
  /** keygate.getUsage: usage for billing, from analytics (docs/usage.md). */
  readonly usage: UsageService;
  /** Webhook endpoints (keygate.*Webhook), the notice sink and the delivery that runs once started. */
  readonly webhooks: Webhooks;
  /**
   * Where the domain posts notices (the webhook dispatcher unless the options give another sink); a write is
   * answered once the notices it posted are durable (settled()).
   */
  readonly notices: NoticeSink;
  /** Where every management write records its entry (docs/audit-log.md); asked before a write whether it may go on. */
  readonly audit: AuditTrail;
  /** keygate.listAuditLogs. */
  readonly auditLog: AuditLogService;
  /** Customer portals: the records, their sessions, and the customer's own procedures (portal.*). */
  readonly portals: Portals;
}

export interface ServiceOptions {
  /**
   * Rate limit windows follow `clock` rather than the store's shared clock (Redis TIME). Only for an injected
   * test clock: in production, instances whose clocks disagree must still agree on every window.
   */
  windowsFollowClock?: boolean;
  /** Connected to Redis by the caller when there is one; a local-only bus otherwise. */
  invalidations?: InvalidationBus;
  /** The opened analytics runtime (engine and event pipeline); without one (the CLI) events are dropped, counted. */
  analytics?: AnalyticsRuntime;
  /** Told what the services decide, for metrics; nothing by default. */
  observer?: Observer;
  /** The gateway's routes from the configuration file, compiled; none without a gateway (the CLI). */
  configRoutes?: () => readonly CompiledRoute[];
  /** Its decision-only routes (no upstream: the forward-auth door's), which stored routes may not clash with either. */
  decisionOnlyRoutes?: () => readonly DecisionRoute[];
  /** Told once a change of the stored routes is written; the invalidation bus alone by default. */
  routeNotifier?: RouteChangeNotifier;
  /** The state of a route's upstream targets on this process (the gateway's pools); shown by getRoute. */
  upstreamHealth?: (routeId: string) => UpstreamTargetHealth[] | undefined;
  /** What routes made through the API may reach; by default the configuration's `gateway.apiRoutes` as loaded. */
  apiUpstreams?: ApiUpstreamGuard;
  /** Where the domain posts what an operator asked to hear of (credit crossings; webhooks); nowhere by default. */
  notices?: NoticeSink;
  /** How webhooks are sent and scheduled, and where their background failures go. */
  webhooks?: WebhookWiringOptions;
}

/**
 * How long an authenticated root key is trusted in process before the store is asked again. Revocations reach
 * every instance at once through the invalidation bus; the windows bound what a missed message can cost.
 */
export const ROOT_KEY_CACHE = { freshMs: 10_000, staleMs: 60_000, negativeMs: 2_000 } as const;

/**
 * Verification's key cache: fresh and stale windows as Unkey's. Its bytes come from `cache.maxBytes`
 * (cache/cache-budget.ts); a key created anywhere ends its hash's negative entry on every instance at once.
 */
export const KEY_VIEW_CACHE = { freshMs: 10_000, staleMs: 60_000, negativeMs: 10_000 } as const;

/**
 * Every service, over the stores: the caches in front of them (kept true by the invalidation bus), the rate
 * limiter, then the services of the domain.
 */
export function createServices(stores: Stores, config: KeygateConfig, clock: Clock, options: ServiceOptions = {}): Services {
  const invalidations = options.invalidations ?? new InvalidationBus();
  const analytics = options.analytics ?? disabledAnalytics();
  const observer = options.observer ?? UNOBSERVED;
  const budget = cacheBudget(config.cache.maxBytes);
  const { rootKeyStore, rootKeyCache, keyViews } = caches(stores, clock, observer, invalidations, budget);
  const { limiter, directory } = rateLimiting(stores, config, clock, observer, options.windowsFollowClock ?? false, budget);
  const audit = new SinkAuditTrail(analytics.audit, clock);

  const apis = new ApiService(stores.apis, invalidations, clock, audit);
  const rbac = new RbacService(stores.permissions, stores.roles, invalidations, clock, audit);
  const identities = new IdentityService(stores.identities, invalidations, clock, audit);
  const liveKeys = new LiveKeys(stores.keys, apis);
  const keyViewSources = { keys: stores.keys, apis, rbac, identities };
  const keyMigrations = new KeyMigrationService({
    keys: stores.keys,
    apis,
    rbac,
    identities,
    invalidator: invalidations,
    clock,
    migrations: config.migrations,
    audit,
  });
  const rootKeys = new RootKeyService(rootKeyStore, invalidations, clock, config.rootKeys, audit);
  const vault = config.vault.key === undefined ? undefined : new Vault(config.vault.key);
  const webhooks = createWebhooks(stores, config, clock, vault, {
    ...options.webhooks,
    audit,
    ...defined({ analyticsEngine: analytics.engine }),
  });
  const notices = options.notices ?? webhooks.dispatcher;
  const keys = new KeyService({
    keys: stores.keys,
    live: liveKeys,
    apis,
    rbac,
    identities,
    secrets: new KeySecrets(vault),
    invalidator: invalidations,
    clock,
    generateKey,
    notices,
    audit,
    refunds: analytics.sinks.creditRefunds,
  });
  const analyticsQueries = analyticsService(stores, config, clock, analytics);
  return {
    invalidations,
    caches: () => {
      const views = keyViews.stats();
      const namespaces = directory.stats();
      return [
        { cache: "keys", ...views.keys },
        { cache: "unknown_keys", ...views.unknownKeys },
        { cache: "root_keys", ...rootKeyCache.stats() },
        { cache: "unknown_root_keys", ...rootKeyCache.absentStats() },
        { cache: "namespaces", ...namespaces.namespaces },
        { cache: "namespace_names", ...namespaces.names },
      ];
    },
    notices,
    audit,
    auditLog: new AuditLogService(analytics.audit),
    rootKeys,
    routes: new RouteService({
      store: stores.routes,
      configRoutes: options.configRoutes ?? (() => []),
      ...defined({ upstreamHealth: options.upstreamHealth, decisionOnlyRoutes: options.decisionOnlyRoutes }),
      isApiOf: (workspaceId, id) => apis.isLiveApiOrKeySpace(workspaceId, id),
      openApiProblems: openApiDocumentProblems,
      notifier: options.routeNotifier ?? invalidations,
      upstreamRefusal: (url) =>
        (options.apiUpstreams ?? new ApiUpstreamGuard(() => config.gateway.apiRoutes.allowedUpstreams)).refusal(url),
      rules: ROUTE_RULES,
      clock,
      audit,
    }),
    dashboardSessions: new DashboardSessionService(
      stores.dashboardSessions,
      rootKeys,
      clock,
      {
        idleMs: config.dashboard.sessionIdleTimeoutMs,
        absoluteMs: config.dashboard.sessionAbsoluteTimeoutMs,
      },
      audit,
    ),
    apis,
    keys,
    keyMigrations,
    keyAccess: new KeyAccessService({
      keys: stores.keys,
      live: liveKeys,
      rbac,
      invalidator: invalidations,
      clock,
      audit,
      notices,
      identities,
    }),
    rbac,
    identities,
    ratelimit: new RatelimitService({
      namespaces: stores.ratelimitNamespaces,
      directory,
      limiter,
      clock,
      events: analytics.sinks.ratelimits,
      notices,
      audit,
    }),
    verification: new VerificationService({
      keys: { find: (workspaceId, hash) => keyViews.get(workspaceId, hash, () => loadKeyView(keyViewSources, workspaceId, hash)) },
      limiter,
      events: analytics.sinks,
      clock,
      observer,
      pendingKeys: keyMigrations,
      notices,
    }),
    analytics: analyticsQueries,
    usage: new UsageService({
      engine: analytics.engine,
      apis: stores.apis,
      identities: stores.identities,
      keys: stores.keys,
      clock,
      rawRetentionDays: config.analytics.retentionDays.raw,
    }),
    webhooks,
    portals: new Portals(stores, keys, analyticsQueries, clock, audit),
  };
}

/**
 * The root key and key view caches, which every message of the invalidation bus reaches. While the store cannot
 * answer, a cached entry that awaits revalidation is still served (within its stale window); any other failure of
 * the reload reaches the caller.
 */
function caches(stores: Stores, clock: Clock, observer: Observer, invalidations: InvalidationBus, budget: CacheBudget) {
  const rootKeyCache = new SwrCache<RootKeyRecord>({
    ...ROOT_KEY_CACHE,
    maxBytes: budget.root_keys,
    absentMaxBytes: budget.unknown_root_keys,
    sizeOf: rootKeyBytes,
    clock,
    keepServingOn: isStoreUnavailable,
    onLookup: (result) => observer.cacheLookedUp("root_keys", result),
  });
  const rootKeyStore = new CachedRootKeyStore(stores.rootKeys, rootKeyCache);
  const keyViews = new KeyViewCache({
    ...KEY_VIEW_CACHE,
    maxBytes: budget.keys,
    absentMaxBytes: budget.unknown_keys,
    clock,
    keepServingOn: isStoreUnavailable,
    onLookup: (result) => observer.cacheLookedUp("keys", result),
  });
  invalidations.listen((message) => {
    if (message.kind === "rootKey") rootKeyStore.invalidate(message.hash);
    else if (message.kind === "everything") rootKeyStore.revalidateAll();
    keyViews.invalidate(message);
  });
  return { rootKeyStore, rootKeyCache, keyViews };
}

/** The limiter over the shared counters (this instance's own for `ratelimit.fail: local`), and the namespace directory. */
function rateLimiting(
  stores: Stores,
  config: KeygateConfig,
  clock: Clock,
  observer: Observer,
  windowsFollowClock: boolean,
  budget: CacheBudget,
) {
  const limiter = new Limiter({
    counters: stores.ratelimitCounters,
    localCounters: new MemoryRatelimitCounterStore(clock),
    failMode: config.ratelimit.fail,
    clock,
    windowsFollowClock,
    shared: stores.kind,
    observer,
  });
  const directory = new CachedNamespaceDirectory(
    stores.ratelimitNamespaces,
    clock,
    (result) => observer.cacheLookedUp("namespaces", result),
    budget,
  );
  // A Redis that answers again after an outage may have restarted without its data: confirm what we know with it.
  stores.health.onStateChange((state) => {
    if (state === "closed") directory.revalidateAll();
  });
  return { limiter, directory };
}

function analyticsService(stores: Stores, config: KeygateConfig, clock: Clock, analytics: AnalyticsRuntime): AnalyticsService {
  const { maxConcurrent, ...queryLimits } = config.analytics.query;
  return new AnalyticsService({
    engine: analytics.engine,
    sinks: analytics.sinks,
    apis: stores.apis,
    quota: stores.analyticsQuota,
    clock,
    limits: { ...queryLimits, maxConcurrent },
    quotaLimits: config.analytics.quota,
    retentionDays: config.analytics.retentionDays,
  });
}
