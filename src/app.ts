import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from "node:http";
import Fastify, {
  type FastifyBaseLogger,
  type FastifyHttpOptions,
  type FastifyInstance,
  type FastifyServerFactory,
  LogController,
} from "fastify";
import { type AnalyticsRuntime, openAnalytics } from "./analytics/index.js";
import { InvalidationBus } from "./cache/invalidation-bus.js";
import type { KeygateConfig } from "./config/schema.js";
import { TRUST_EVERY_HOP_WARNING } from "./gateway/client-address.js";
import { Gateway } from "./gateway/gateway.js";
import { compileGatewayState, RouteState } from "./gateway/route-state.js";
import type { RouteTable } from "./gateway/route-table.js";
import { relayUpgrades } from "./gateway/upgrades.js";
import { addRequestIdHeader, answerFrameworkError, clientErrorHandler, errorHandling } from "./http/error-handler.js";
import { Metrics, UNOBSERVED_UPSTREAMS } from "./http/metrics.js";
import { NODE_CHECKS_LEFT_TO_KEYGATE, refuseUnservableRequests } from "./http/protocol-checks.js";
import { fastifyRequestTelemetry, RequestTelemetry } from "./http/request-telemetry.js";
import { closeWhenAnsweredEarly, connectionsCheckingInterval } from "./http/slow-requests.js";
import { type Clock, systemClock } from "./lib/clock.js";
import { defined } from "./lib/defined.js";
import { newId } from "./lib/ids.js";
import { LogRedaction } from "./lib/log-redaction.js";
import { packageVersion } from "./lib/package-version.js";
import { dashboardRoutes } from "./routes/dashboard.js";
import { type MetricsRouteOptions, metricsRoute } from "./routes/metrics.js";
import { openApi } from "./routes/openapi.js";
import { healthRoutes } from "./routes/v2/health.js";
import { v2Routes } from "./routes/v2/index.js";
import { createServices, type Services } from "./services.js";
import { isRedisBacked, openStores } from "./storage/index.js";
import type { Stores } from "./storage/interfaces.js";

declare module "fastify" {
  interface FastifyInstance {
    services: Services;
    stores: Stores;
    /** The analytics engine and event pipeline of this instance (its counters feed GET /metrics). */
    analytics: AnalyticsRuntime;
    /** The gateway's routes; replace the snapshot to reload them. */
    gatewayRoutes: RouteState;
    /** The Prometheus series of this app; undefined when metrics are off. */
    metrics: Metrics | undefined;
  }
}

export interface BuildOptions {
  /** Stores to use instead of opening the configured ones; the caller keeps ownership and closes them. */
  stores?: Stores;
  /** Analytics to use instead of opening the configured engine; the caller keeps ownership and closes it. */
  analytics?: AnalyticsRuntime;
  clock?: Clock;
  /** false silences the log (tests); otherwise the configured level applies. */
  logger?: boolean;
  /** Where log lines go instead of stdout (tests read them); each line is redacted as on stdout. */
  logStream?: { write(line: string): void };
  /** What GET /metrics answers instead of this app's own series (a worker: every worker's, added up). */
  scrapeMetrics?: () => Promise<string>;
}

/**
 * Builds the keygate application for a configuration without listening. Opens the configured stores and analytics
 * engine (closed again by app.close(), after the buffered verification events are written), creates the APIs the
 * configuration declares, and registers every route.
 */
export async function buildApp(config: KeygateConfig, options: BuildOptions = {}): Promise<FastifyInstance> {
  const clock = options.clock ?? systemClock;
  const routes = new RouteState(compileGatewayState(config));
  const docsUrl = config.errors.docsUrl;
  let gateway: Gateway | undefined;
  const app: FastifyInstance = Fastify({
    ...serverOptions(config, routes, options, () => app.log),
    serverFactory: gatewayFirst((request, response) => gateway?.handle(request, response) === true),
  });
  const servedByApplication = applicationPaths(app);

  const stores =
    options.stores ??
    (await openStores(config.storage.redis, { clock, ratelimitReservations: config.ratelimit.reservations, log: app.log }));
  if (!options.stores) app.addHook("onClose", async () => stores.close());
  let analytics: AnalyticsRuntime;
  try {
    analytics = options.analytics ?? (await openAnalytics(config.analytics, { clock, log: { warn: (message) => app.log.warn(message) } }));
  } catch (error) {
    await app.close();
    throw error;
  }
  if (!options.analytics) app.addHook("onClose", async () => analytics.close());
  const invalidations = new InvalidationBus();
  if (isRedisBacked(stores)) {
    await invalidations.connect(stores.redis, stores.prefix);
    app.addHook("onClose", async () => invalidations.close());
  }
  const metrics = config.metrics.enabled ? new Metrics(stores, analytics) : undefined;
  if (metrics) app.addHook("onClose", async () => metrics.close());
  // An injected clock (tests) also drives rate limit windows; otherwise they follow the store's shared clock.
  const services = createServices(stores, config, clock, {
    windowsFollowClock: options.clock !== undefined,
    invalidations,
    analytics,
    gatewayRoutes: () => routes.current.table.routes.map((route) => route.config),
    ...defined({ observer: metrics }),
  });
  stores.breaker?.onStateChange((state) => {
    if (state === "open")
      app.log.warn({ fail: config.ratelimit.fail }, "Redis does not answer: rate limits follow ratelimit.fail until it does");
    else if (state === "closed") app.log.info("Redis answers again: rate limits are exact again");
  });
  app.decorate("stores", stores);
  app.decorate("services", services);
  app.decorate("analytics", analytics);
  app.decorate("metrics", metrics);

  // /v2 takes JSON only; Fastify's default text/plain parser would turn a text body into a confusing 400.
  app.removeContentTypeParser("text/plain");
  addRequestIdHeader(app);
  const telemetry = new RequestTelemetry({ metrics, accessLog: config.logging.requests });
  fastifyRequestTelemetry(app, telemetry);
  refuseUnservableRequests(app);
  closeWhenAnsweredEarly(app);
  await app.register(errorHandling, { docsUrl, bodyLimit: config.server.bodyLimit });
  await openApi(app, { version: packageVersion() });
  await app.register(v2Routes, { requestTimeoutMs: config.server.requestTimeoutMs });
  await app.register(healthRoutes, { stores, analytics });
  if (config.dashboard.enabled) {
    await app.register(dashboardRoutes, {
      path: config.dashboard.path,
      requestTimeoutMs: config.server.requestTimeoutMs,
      sessionAbsoluteTimeoutMs: config.dashboard.sessionAbsoluteTimeoutMs,
    });
  }
  if (metrics)
    await serveMetrics(app, { metrics, token: config.metrics.token, scrape: options.scrapeMetrics ?? (() => metrics.text()) }, config);
  if (config.gateway.trustProxy === true) app.log.warn(TRUST_EVERY_HOP_WARNING);
  app.decorate("gatewayRoutes", routes);
  const upstreams = metrics ?? UNOBSERVED_UPSTREAMS;
  const face = new Gateway({
    services,
    state: routes,
    docsUrl,
    log: app.log,
    telemetry,
    events: analytics.sinks.gatewayRequests,
    clock,
    upstreams,
    servedByApplication,
  });
  gateway = face;
  relayUpgrades(app, {
    decider: face.decider,
    events: face.events,
    refund: (decision) => face.refund(decision),
    docsUrl,
    upstreams,
  });
  app.addHook("preClose", (done) => {
    face.startClosing();
    done();
  });
  app.addHook("onClose", async () => face.close());

  try {
    for (const api of config.apis) await services.apis.declare(api);
  } catch (error) {
    await app.close();
    throw error;
  }
  return app;
}

/** Fastify's options: the redacted JSON log, request ids, timeouts, strict validation, errors in the envelope. */
function serverOptions(
  config: KeygateConfig,
  routes: RouteState,
  options: BuildOptions,
  log: () => FastifyBaseLogger,
): FastifyHttpOptions<Server> {
  const docsUrl = config.errors.docsUrl;
  return {
    logger:
      options.logger === false
        ? false
        : {
            level: config.logging.level,
            // Every line, whoever writes it, passes here last: no key or root key reaches the log.
            hooks: { streamWrite: redactionFollowing(routes) },
            // process.stdout writes synchronously to files, pipes and terminals (Linux): lines keep their order with
            // what goes to stderr (the bootstrap root key's banner comes after them) and none is lost at exit.
            stream: options.logStream ?? process.stdout,
          },
    // The access log (logging.requests) replaces Fastify's own two lines per request: see requestTelemetry.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: "requestId" }),
    // Requests refused before routing are answered in the envelope too (docs/errors.md).
    clientErrorHandler: clientErrorHandler({ docsUrl, log, logRequests: config.logging.requests !== false }),
    frameworkErrors: (error, request, reply) =>
      answerFrameworkError(error, request, reply, { docsUrl, logRequests: config.logging.requests !== false }),
    bodyLimit: config.server.bodyLimit,
    // Node's requestTimeout stays off (Fastify's default): it would cut the gateway's streaming uploads. /v2 has a
    // body deadline of its own (src/http/slow-requests.ts).
    http: {
      headersTimeout: config.server.headersTimeoutMs,
      requestTimeout: 0,
      connectionsCheckingInterval: connectionsCheckingInterval(config.server.headersTimeoutMs),
      ...NODE_CHECKS_LEFT_TO_KEYGATE,
    },
    genReqId: () => newId("req"),
    requestIdHeader: false,
    // Requests arriving while keygate closes get a 503 in the envelope from errorHandling instead.
    return503OnClosing: false,
    ajv: {
      // api-decisions.md: validate strictly, never coerce or drop. Defaults of optional fields are filled in.
      customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: true, allErrors: true, allowUnionTypes: true },
    },
  };
}

/**
 * Fastify's server with the gateway's request listener ahead of Fastify's own: a request the gateway takes never
 * reaches Fastify's routing. The server is made as Fastify would make it (its options, timeouts).
 */
function gatewayFirst(gatewayTook: (request: IncomingMessage, response: ServerResponse) => boolean): FastifyServerFactory {
  return (handler, fastifyOptions) => {
    // Fastify has filled in its defaults by now.
    const options = fastifyOptions as { http?: ServerOptions; keepAliveTimeout: number; requestTimeout: number; connectionTimeout: number };
    const server = createServer(options.http ?? {}, (request, response) => {
      if (!gatewayTook(request, response)) handler(request, response);
    });
    server.keepAliveTimeout = options.keepAliveTimeout;
    server.requestTimeout = options.requestTimeout;
    server.setTimeout(options.connectionTimeout);
    return server;
  };
}

/**
 * The paths the application's own routes serve outside /v2 (/metrics, say), learnt as routes are registered:
 * the gateway leaves them to the application even under a route whose prefix covers them.
 */
function applicationPaths(app: FastifyInstance): (path: string) => boolean {
  const exact = new Set<string>();
  const prefixes: string[] = [];
  app.addHook("onRoute", ({ url }) => {
    if (url.startsWith("/v2/") || url === "/v2") return;
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

/**
 * Log redaction that knows the key locations of every route table `routes` has held: a reload adds the new
 * routes' locations before the next line is written.
 */
function redactionFollowing(routes: RouteState): (line: string) => string {
  const redaction = new LogRedaction();
  let learntFrom: RouteTable | undefined;
  return (line) => {
    const table = routes.current.table;
    if (table !== learntFrom) {
      redaction.learn(table.routes.map((route) => route.keySource));
      learntFrom = table;
    }
    return redaction.redact(line);
  };
}
