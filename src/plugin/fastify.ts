import type { FastifyInstance, FastifyPluginAsync, preHandlerAsyncHookHandler, RouteOptions } from "fastify";
import fp from "fastify-plugin";
import { type AnalyticsRuntime, disabledAnalytics, openAnalytics } from "../analytics/index.js";
import { InvalidationBus } from "../cache/invalidation-bus.js";
import { GatewayDecider } from "../gateway/decision.js";
import { CurrentGatewaySnapshot, compileGatewaySnapshot } from "../gateway/gateway-snapshot.js";
import { routeSyncFollowing } from "../gateway/route-sync.js";
import { Metrics } from "../http/metrics.js";
import { systemClock } from "../lib/clock.js";
import { defined } from "../lib/defined.js";
import { createServices, type Services } from "../services.js";
import { openStores } from "../storage/index.js";
import { compileRouteOptions, type KeygatePluginOptions, type KeygateRouteOptions, pluginConfig } from "./options.js";
import { type KeygatePrincipal, RouteGuards } from "./route-guard.js";

export type {
  KeygateKeyOptions,
  KeygatePluginOptions,
  KeygatePolicyOptions,
  KeygateRedisOptions,
  KeygateRouteOptions,
  KeygateStoredRouteOptions,
} from "./options.js";
export type { KeygatePrincipal } from "./route-guard.js";

/** What the plugin adds to the Fastify instance, as `app.keygate`. */
export interface KeygateDecoration {
  /** A preHandler protecting a route with these options: the same as the route's `config.keygate`. */
  preHandler(options: KeygateRouteOptions, realm?: string): preHandlerAsyncHookHandler;
  /** The plugin's Prometheus series (verifications, rate limit decisions, caches, analytics events), as text. */
  metrics(): Promise<string>;
  /** keygate's services over the shared stores (keys, APIs, rate limits…), for an app that manages keys itself. */
  readonly services: Services;
}

declare module "fastify" {
  interface FastifyInstance {
    keygate: KeygateDecoration;
  }
  interface FastifyRequest {
    /** The verified key on a route keygate protects; null on others. */
    keygate: KeygatePrincipal | null;
  }
  interface FastifyContextConfig {
    /** Protects the route: its requests need a key of `apiId` that passes these checks. */
    keygate?: KeygateRouteOptions;
  }
}

/**
 * keygate in a Fastify app: the same stores, caches and invalidation bus as keygate servers on the same Redis and
 * prefix, and the one verification path, so limits, credits and key changes are shared with them exactly. Routes
 * registered after it with `config.keygate` are protected by a preHandler (after the body is parsed and
 * validated, so a request refused by the app's own schema spends nothing).
 */
const keygatePlugin: FastifyPluginAsync<KeygatePluginOptions> = async (app, options) => {
  const config = pluginConfig(options);
  const clock = options.clock ?? systemClock;
  const stores = await openStores(config.storage.redis, { clock, ratelimitReservations: config.ratelimit.reservations, log: app.log });
  app.addHook("onClose", async () => stores.close());
  let analytics: AnalyticsRuntime = disabledAnalytics();
  try {
    if (config.analytics.engine === "clickhouse") {
      analytics = await openAnalytics(config.analytics, {
        clock,
        log: { warn: (message) => app.log.warn(message) },
        ...defined({ auditOutbox: stores.auditOutbox }),
      });
    }
    const opened = analytics;
    app.addHook("onClose", async () => opened.close());
    const invalidations = new InvalidationBus();
    await invalidations.connect(stores.broadcast);
    app.addHook("onClose", async () => invalidations.close());
    const metrics = new Metrics(stores, analytics);
    app.addHook("onClose", async () => metrics.close());
    // Windows follow Redis's clock, as on the servers: every instance agrees on them.
    const services = createServices(stores, config, clock, { invalidations, analytics, observer: metrics });
    metrics.watchCaches(services.caches);
    // The stored routes, followed as a server follows them, for routes that name one.
    const snapshot = new CurrentGatewaySnapshot(compileGatewaySnapshot({ routes: [], gateway: config.gateway }));
    const routeSync = routeSyncFollowing(snapshot, stores.routes, invalidations, app.log);
    app.addHook("onClose", async () => routeSync.stop());
    await routeSync.start();
    const decider = new GatewayDecider(services, app.log, config.ratelimit.ipv6PrefixLength);
    const guards = new RouteGuards({ decider, snapshot, docsUrl: config.errors.docsUrl, log: app.log });
    const preHandler = (route: KeygateRouteOptions, realm = route.apiId ?? route.route ?? "keygate") =>
      guards.guard(compileRouteOptions(route, realm));
    app.decorate("keygate", { preHandler, metrics: () => metrics.text(), services });
    app.decorateRequest("keygate", null);
    app.addHook("onRoute", function (route) {
      protect(this, route, guards);
    });
  } catch (error) {
    // What was opened before the failure is closed with the app; this closes the rest.
    await analytics.close();
    await stores.close();
    throw error;
  }
};

/**
 * Puts the route's guard first among its preHandlers when it asks for one. A route whose policies include a cors
 * policy gets an OPTIONS route beside it that answers CORS preflights as the gateway does (unless it takes OPTIONS
 * itself): Fastify routes a preflight by its own method, never to the route it asks about.
 */
function protect(app: FastifyInstance, route: RouteOptions, guards: RouteGuards): void {
  const options = route.config?.keygate;
  // The OPTIONS route added below has no config.keygate: its own onRoute ends here.
  if (options === undefined) return;
  const compiled = compileRouteOptions(options, `${route.method} ${route.url}`);
  const guard = guards.guard(compiled);
  const own = route.preHandler;
  route.preHandler = own === undefined ? [guard] : Array.isArray(own) ? [guard, ...own] : [guard, own];
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  if (compiled.kind !== "policies" || compiled.route.cors.length === 0 || methods.includes("OPTIONS")) return;
  if (app.hasRoute({ method: "OPTIONS", url: route.url })) return;
  app.route({ method: "OPTIONS", url: route.url, handler: guards.preflight(compiled.route, methods) });
}

/** `app.register(keygate, { redis, prefix })`: keygate's verification in this app (docs/plugin.md). */
const keygate = fp(keygatePlugin, { fastify: "5.x", name: "keygate" });
export default keygate;
export { keygate };
