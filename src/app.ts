import Fastify, { type FastifyInstance } from "fastify";
import { type AnalyticsRuntime, openAnalytics } from "./analytics/index.js";
import { InvalidationBus } from "./cache/invalidation-bus.js";
import type { KeygateConfig } from "./config/schema.js";
import { readTlsFiles, type TlsCredentials, type TlsSettings } from "./config/tls-files.js";
import type { NoticeSink } from "./domain/notices.js";
import { closeHttp2Sessions, gatewayFirst, type ServerLogOptions, serverOptions } from "./fastify-server.js";
import { TRUST_EVERY_HOP_WARNING } from "./gateway/client-address.js";
import { Gateway, type GatewayOptions } from "./gateway/gateway.js";
import { CurrentGatewaySnapshot, compileGatewaySnapshot } from "./gateway/gateway-snapshot.js";
import { derivedPseudonym } from "./gateway/loop-detection.js";
import { type RouteSync, routeSyncFollowing } from "./gateway/route-sync.js";
import { ApiUpstreamGuard } from "./gateway/upstream-guard.js";
import { addRequestIdHeader, errorHandling } from "./http/error-handler.js";
import { Metrics, UNOBSERVED_UPSTREAMS } from "./http/metrics.js";
import { refuseAtTheDoor } from "./http/protocol-checks.js";
import { isManagementPath } from "./http/request-target.js";
import { fastifyRequestTelemetry, RequestTelemetry } from "./http/request-telemetry.js";
import { closeWhenAnsweredEarly } from "./http/slow-requests.js";
import { type Clock, systemClock } from "./lib/clock.js";
import { defined } from "./lib/defined.js";
import { packageVersion } from "./lib/package-version.js";
import { dashboardRoutes } from "./routes/dashboard.js";
import { errorPages } from "./routes/error-pages.js";
import { type MetricsRouteOptions, metricsRoute } from "./routes/metrics.js";
import { openApi } from "./routes/openapi.js";
import { portalPageRoutes } from "./routes/portal-pages.js";
import { healthRoutes } from "./routes/v2/health.js";
import { v2Routes } from "./routes/v2/index.js";
import { createServices, type Services } from "./services.js";
import { openStores } from "./storage/index.js";
import type { Stores } from "./storage/interfaces.js";
import { type SecureServer, ServerCertificates } from "./tls-certificates.js";

declare module "fastify" {
  interface FastifyInstance {
    services: Services;
    stores: Stores;
    /** The analytics engine and event pipeline of this instance (its counters feed GET /metrics). */
    analytics: AnalyticsRuntime;
    /** The routes and settings the gateway serves new requests with; replace the snapshot to reload them. */
    gatewaySnapshot: CurrentGatewaySnapshot;
    /** The Prometheus series of this app; undefined when metrics are off. */
    metrics: Metrics | undefined;
    /** The server's TLS certificate (server.tls), reloaded by `reload()` and when its files change; undefined without TLS. */
    certificates: ServerCertificates | undefined;
  }
}

export interface BuildOptions extends ServerLogOptions {
  /** Stores to use instead of opening the configured ones; the caller keeps ownership and closes them. */
  stores?: Stores;
  /** Analytics to use instead of opening the configured engine; the caller keeps ownership and closes it. */
  analytics?: AnalyticsRuntime;
  clock?: Clock;
  /** What GET /metrics answers instead of this app's own series (a worker: every worker's, added up). */
  scrapeMetrics?: () => Promise<string>;
  /** Where the services post notices (credit crossings); nowhere without one. */
  notices?: NoticeSink;
}

/**
 * Builds the keygate application for a configuration without listening. Opens the configured stores and analytics
 * engine (closed again by app.close(), after the buffered verification events are written), creates the APIs the
 * configuration declares, and registers every route. In phases: the runtime (stores, analytics, invalidations,
 * metrics), the services, the HTTP face (/v2, health, dashboard, metrics), the gateway, the declared APIs.
 */
export async function buildApp(config: KeygateConfig, options: BuildOptions = {}): Promise<FastifyInstance> {
  const clock = options.clock ?? systemClock;
  const snapshot = new CurrentGatewaySnapshot(compileGatewaySnapshot(config));
  let gateway: Gateway | undefined;
  // Throws a ConfigError naming the field and file before anything is opened.
  const tls = config.server.tls && readTlsFiles(config.server.tls);
  const app: FastifyInstance = Fastify({
    ...serverOptions(config, snapshot, options, () => app.log),
    serverFactory: gatewayFirst((request, response) => gateway?.handle(request, response) === true, tls),
  });
  const servedByApplication = applicationPaths(app);
  app.decorate("gatewaySnapshot", snapshot);
  app.decorate("certificates", tls && config.server.tls ? watchCertificates(app, config.server.tls, tls) : undefined);

  const runtime = await openRuntime(app, config, clock, options);
  const routeSync = syncRoutes(app, snapshot, runtime);
  // The operator's list in force: a reload of the gateway settings changes what routes of the API may reach.
  const apiUpstreams = new ApiUpstreamGuard(() => snapshot.current.settings.apiRoutes.allowedUpstreams);
  // An injected clock (tests) also drives rate limit windows; otherwise they follow the store's shared clock.
  const services = createServices(runtime.stores, config, clock, {
    windowsFollowClock: options.clock !== undefined,
    invalidations: runtime.invalidations,
    analytics: runtime.analytics,
    configRoutes: () => snapshot.current.table.routes.filter((route) => route.definition.source === "config"),
    decisionOnlyRoutes: () => snapshot.current.table.decisionOnly,
    upstreamHealth: (routeId) => gateway?.pools.health(routeId),
    apiUpstreams,
    // A change written here is in force on this instance before its procedure answers.
    routeNotifier: {
      routesChanged: async (version) => {
        await runtime.invalidations.routesChanged(version);
        await routeSync.refresh();
      },
    },
    webhooks: { onError: (error, what) => app.log.warn({ err: error }, `webhooks: ${what}`) },
    ...defined({ observer: runtime.metrics, notices: options.notices }),
  });
  app.decorate("services", services);
  runtime.metrics?.watchCaches(services.caches);
  if (config.webhooks.deliver) {
    services.webhooks.runner.start();
    services.webhooks.usageRunner.start();
  }
  // Before the stores close: no lease is left held, and notices posted so far reach the outbox.
  app.addHook("preClose", async () => {
    await services.webhooks.usageRunner.stop();
    await services.webhooks.runner.stop();
    await services.webhooks.dispatcher.flush();
    await services.webhooks.closeConnections();
  });
  await routeSync.start();

  const telemetry = new RequestTelemetry({ metrics: runtime.metrics, accessLog: config.logging.requests });
  await registerHttpFace(app, config, { ...runtime, telemetry }, options);
  gateway = openGateway(app, config, {
    services,
    snapshot,
    telemetry,
    clock,
    analytics: runtime.analytics,
    upstreams: runtime.metrics ?? UNOBSERVED_UPSTREAMS,
    servedByApplication,
    apiUpstreams,
    pseudonym: derivedPseudonym(sharedStorage(config)),
    ipv6PrefixLength: config.ratelimit.ipv6PrefixLength,
  });
  // Last of the preClose hooks, once the gateway refuses new requests: HTTP/2 connections end with a GOAWAY (their
  // streams in flight done first) rather than hold the close open.
  if (tls) {
    app.addHook("preClose", (done) => {
      closeHttp2Sessions(app.server);
      done();
    });
  }

  try {
    for (const api of config.apis) await services.apis.declare(api);
  } catch (error) {
    await app.close();
    throw error;
  }
  return app;
}

interface Runtime {
  stores: Stores;
  analytics: AnalyticsRuntime;
  invalidations: InvalidationBus;
  metrics: Metrics | undefined;
}

/**
 * The stores, the analytics engine, the invalidation bus and the metrics, each closed with the app unless the
 * caller gave it (then the caller keeps ownership).
 */
async function openRuntime(app: FastifyInstance, config: KeygateConfig, clock: Clock, options: BuildOptions): Promise<Runtime> {
  const stores =
    options.stores ??
    (await openStores(config.storage.redis, { clock, ratelimitReservations: config.ratelimit.reservations, log: app.log }));
  if (!options.stores) app.addHook("onClose", async () => stores.close());
  let analytics: AnalyticsRuntime;
  try {
    analytics =
      options.analytics ??
      (await openAnalytics(config.analytics, {
        clock,
        log: { warn: (message) => app.log.warn(message) },
        ...defined({ auditOutbox: stores.auditOutbox }),
      }));
  } catch (error) {
    await app.close();
    throw error;
  }
  if (!options.analytics) app.addHook("onClose", async () => analytics.close());
  const invalidations = new InvalidationBus();
  await invalidations.connect(stores.broadcast);
  app.addHook("onClose", async () => invalidations.close());
  const metrics = config.metrics.enabled ? new Metrics(stores, analytics) : undefined;
  if (metrics) app.addHook("onClose", async () => metrics.close());
  stores.health.onStateChange((state) => {
    if (state === "open")
      app.log.warn({ fail: config.ratelimit.fail }, "Redis does not answer: rate limits follow ratelimit.fail until it does");
    else if (state === "closed") app.log.info("Redis answers again: rate limits are exact again");
  });
  app.decorate("stores", stores);
  app.decorate("analytics", analytics);
  app.decorate("metrics", metrics);
  return { stores, analytics, invalidations, metrics };
}

/**
 * Keeps the snapshot's stored routes current: every change announced on the invalidation bus (after a gap in its
 * messages, the table is read again), and the version checked every second.
 */
function syncRoutes(app: FastifyInstance, snapshot: CurrentGatewaySnapshot, runtime: Runtime): RouteSync {
  const sync = routeSyncFollowing(snapshot, runtime.stores.routes, runtime.invalidations, app.log);
  app.addHook("onClose", async () => sync.stop());
  return sync;
}

/** What Fastify serves: the door's refusals and errors, /v2, the OpenAPI document, health, the dashboard, metrics. */
async function registerHttpFace(
  app: FastifyInstance,
  config: KeygateConfig,
  runtime: Runtime & { telemetry: RequestTelemetry },
  options: BuildOptions,
): Promise<void> {
  const docsUrl = config.errors.docsUrl;
  // /v2 takes JSON only; Fastify's default text/plain parser would turn a text body into a confusing 400.
  app.removeContentTypeParser("text/plain");
  addRequestIdHeader(app);
  fastifyRequestTelemetry(app, runtime.telemetry);
  refuseAtTheDoor(app);
  closeWhenAnsweredEarly(app);
  await app.register(errorHandling, { docsUrl, bodyLimit: config.server.bodyLimit });
  await openApi(app, { version: packageVersion() });
  await app.register(errorPages);
  await app.register(v2Routes, { requestTimeoutMs: config.server.requestTimeoutMs });
  await app.register(healthRoutes, { stores: runtime.stores, analytics: runtime.analytics });
  await app.register(portalPageRoutes);
  if (config.dashboard.enabled) {
    await app.register(dashboardRoutes, {
      path: config.dashboard.path,
      requestTimeoutMs: config.server.requestTimeoutMs,
      sessionAbsoluteTimeoutMs: config.dashboard.sessionAbsoluteTimeoutMs,
    });
  }
  const metrics = runtime.metrics;
  if (metrics)
    await serveMetrics(app, { metrics, token: config.metrics.token, scrape: options.scrapeMetrics ?? (() => metrics.text()) }, config);
}

/**
 * The gateway: plain requests through the server's first listener (gatewayFirst), every upgrade through the
 * server's 'upgrade' event; refusing new requests from the moment the app starts closing, its upstream connections
 * closed with the app.
 */
function openGateway(
  app: FastifyInstance,
  config: KeygateConfig,
  parts: Pick<
    GatewayOptions,
    | "services"
    | "snapshot"
    | "telemetry"
    | "clock"
    | "upstreams"
    | "servedByApplication"
    | "apiUpstreams"
    | "pseudonym"
    | "ipv6PrefixLength"
  > & {
    analytics: AnalyticsRuntime;
  },
): Gateway {
  if (config.gateway.trustProxy === true) app.log.warn(TRUST_EVERY_HOP_WARNING);
  const { analytics, ...gatewayParts } = parts;
  const gateway = new Gateway({ ...gatewayParts, docsUrl: config.errors.docsUrl, log: app.log, events: analytics.sinks.gatewayRequests });
  app.metrics?.watchUpstreamTargets(() => gateway.pools.samples());
  const onUpgrade = gateway.handleUpgrade.bind(gateway);
  app.server.on("upgrade", onUpgrade);
  const closeOnceIdle = connectionsClosedOnceIdle(app);
  app.addHook("preClose", (done) => {
    gateway.startClosing();
    closeOnceIdle();
    done();
  });
  app.addHook("onClose", async () => {
    app.server.off("upgrade", onUpgrade);
    await gateway.close();
  });
  return gateway;
}

/**
 * What every instance of this deployment shares and nothing else does: its Redis (credentials left out) and key
 * prefix; undefined on in-memory stores, where the process is the whole deployment.
 */
function sharedStorage(config: KeygateConfig): string | undefined {
  const redis = config.storage.redis;
  if (redis === undefined) return undefined;
  const where = (url: string) => {
    const parsed = URL.parse(url);
    return parsed === null ? url : `${parsed.host}${parsed.pathname}`;
  };
  const servers = redis.url !== undefined ? [redis.url] : (redis.cluster?.nodes ?? redis.sentinel?.sentinels ?? []);
  return JSON.stringify([servers.map(where).sort(), redis.sentinel?.name ?? null, redis.prefix]);
}

/**
 * Fastify closes the connections that are idle when it starts closing; a keep-alive connection whose request was in
 * flight then is closed once it goes idle too (call the function returned when closing starts), rather than hold the
 * server open for its keepAliveTimeout (72 s).
 */
function connectionsClosedOnceIdle(app: FastifyInstance): () => void {
  let timer: NodeJS.Timeout | undefined;
  app.addHook("onClose", async () => clearInterval(timer));
  return () => {
    const server = app.server as Partial<Pick<typeof app.server, "closeIdleConnections">>;
    if (server.closeIdleConnections === undefined) return;
    timer = setInterval(() => server.closeIdleConnections?.(), IDLE_CHECK_WHILE_CLOSING_MS);
    timer.unref();
  };
}

const IDLE_CHECK_WHILE_CLOSING_MS = 100;

/** The server's certificate, reloaded when its files change (and by SIGHUP: server.ts); the watch ends with the app. */
function watchCertificates(app: FastifyInstance, settings: TlsSettings, tls: TlsCredentials): ServerCertificates {
  const certificates = new ServerCertificates(app.server as unknown as SecureServer, settings, tls, app.log);
  certificates.watch();
  app.addHook("onClose", async () => certificates.close());
  return certificates;
}

/**
 * The paths the application's own routes serve outside /v2 (/metrics, say), learnt as routes are registered:
 * the gateway leaves them to the application even under a route whose prefix covers them.
 */
function applicationPaths(app: FastifyInstance): (path: string) => boolean {
  const exact = new Set<string>();
  const prefixes: string[] = [];
  app.addHook("onRoute", ({ url }) => {
    if (isManagementPath(url)) return;
    if (url.endsWith("*")) prefixes.push(url.slice(0, -1));
    else exact.add(url);
  });
  return (path) => exact.has(path) || prefixes.some((prefix) => path.startsWith(prefix));
}

/**
 * GET /metrics on the main port, or (metrics.port) on a listener of its own that opens and closes with the app:
 * Prometheus can then reach it on an internal network while the main port faces clients.
 */
async function serveMetrics(app: FastifyInstance, options: MetricsRouteOptions, config: KeygateConfig): Promise<void> {
  const port = config.metrics.port;
  if (port === undefined) {
    await app.register(metricsRoute, options);
    return;
  }
  const server = Fastify({ logger: false });
  await server.register(errorHandling, { docsUrl: config.errors.docsUrl, bodyLimit: config.server.bodyLimit });
  await server.register(metricsRoute, options);
  app.addHook("onListen", async () => {
    const address = await server.listen({ host: config.server.host, port });
    app.log.info({ address }, `metrics: served at ${address}/metrics`);
  });
  app.addHook("onClose", async () => server.close());
}
