import Fastify, { LogController, type FastifyInstance } from "fastify";
import { openAnalytics, type AnalyticsRuntime } from "./analytics/index.js";
import type { KeygateConfig } from "./config/schema.js";
import { addRequestIdHeader, answerUnmatched, errorHandling } from "./errors/error-handler.js";
import { gateway } from "./gateway/gateway.js";
import { RouteState } from "./gateway/route-state.js";
import { RouteTable } from "./gateway/route-table.js";
import { NODE_CHECKS_LEFT_TO_KEYGATE, refuseUnservableRequests } from "./http/protocol-checks.js";
import { systemClock, type Clock } from "./lib/clock.js";
import { newId } from "./lib/ids.js";
import { metricsRoute } from "./routes/metrics.js";
import { v2Routes } from "./routes/v2/index.js";
import { createServices, type Services } from "./services.js";
import { InvalidationBus } from "./cache/invalidation-bus.js";
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
}

/**
 * Builds the keygate application for a configuration without listening. Opens the configured stores and analytics
 * engine (closed again by app.close(), after the buffered verification events are written), creates the APIs the
 * configuration declares, and registers every route.
 */
export async function buildApp(config: KeygateConfig, options: BuildOptions = {}): Promise<FastifyInstance> {
  const clock = options.clock ?? systemClock;
  const app = Fastify({
    logger:
      options.logger === false
        ? false
        : { level: config.logging.level, redact: ["req.headers.authorization", 'req.headers["x-api-key"]'] },
    logController: new LogController({ disableRequestLogging: !config.logging.requests, requestIdLogLabel: "requestId" }),
    bodyLimit: config.server.bodyLimit,
    genReqId: () => newId("req"),
    http: NODE_CHECKS_LEFT_TO_KEYGATE,
    requestIdHeader: false,
    return503OnClosing: true,
    ajv: {
      // api-decisions.md: validate strictly, never coerce or drop. Defaults of optional fields are filled in.
      customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: true, allErrors: true, allowUnionTypes: true },
    },
  });

  const stores = options.stores ?? (await openStores(config.storage, { clock, ratelimitReservations: config.ratelimit.reservations }));
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
  // An injected clock (tests) also drives rate limit windows; otherwise they follow the store's shared clock.
  const services = createServices(stores, config, clock, { windowsFollowClock: options.clock !== undefined, invalidations, analytics });
  stores.breaker?.onStateChange((state) => {
    if (state === "open") app.log.warn({ fail: config.ratelimit.fail }, "Redis does not answer: rate limits follow ratelimit.fail until it does");
    else if (state === "closed") app.log.info("Redis answers again: rate limits are exact again");
  });
  app.decorate("stores", stores);
  app.decorate("services", services);
  app.decorate("analytics", analytics);

  // /v2 takes JSON only; Fastify's default text/plain parser would turn a text body into a confusing 400.
  app.removeContentTypeParser("text/plain");
  addRequestIdHeader(app);
  refuseUnservableRequests(app);
  await app.register(errorHandling, { docsUrl: config.errors.docsUrl, bodyLimit: config.server.bodyLimit });
  await app.register(v2Routes);
  await app.register(metricsRoute);
  const routes = new RouteState({ table: RouteTable.compile(config.routes), settings: config.gateway });
  app.decorate("gatewayRoutes", routes);
  await app.register(gateway, { state: routes, docsUrl: config.errors.docsUrl, unmatched: (request, reply) => answerUnmatched(app, request, reply, config.errors.docsUrl) });

  try {
    for (const api of config.apis) await services.apis.declare(api);
  } catch (error) {
    await app.close();
    throw error;
  }
  return app;
}
