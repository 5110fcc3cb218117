import Fastify from "fastify";
import t from "tap";
import { buildApp } from "../../src/app.js";
import { ConfigError, validateConfig } from "../../src/config/load.js";
import { KeygateError } from "../../src/errors/keygate-error.js";
import { GatewayDecider } from "../../src/gateway/decision.js";
import { CurrentGatewaySnapshot, compileGatewaySnapshot } from "../../src/gateway/gateway-snapshot.js";
import keygate from "../../src/plugin/fastify.js";
import { compileRouteOptions } from "../../src/plugin/options.js";
import { RouteGuards } from "../../src/plugin/route-guard.js";
import { REDIS_URL } from "../helpers/redis.js";
import { waitFor } from "../helpers/wait.js";
import { API, bearer, disabledPropagates, type KeygateModules, pair, sharedExactly, verifiesWithPrincipal } from "./scenarios.js";

// The plugin from this repository's sources next to a keygate server on one Redis (test/package/ runs the same
// scenarios on the packed package), and what only the sources can show: option checks, analytics, failures.

const modules: KeygateModules = { buildApp, validateConfig, keygate, Fastify };

t.test("keys made on a keygate server verify in the app, with the principal and keygate's refusals", async (t) => {
  const both = await pair(t, modules);
  await verifiesWithPrincipal(t, both);
  const metrics = await both.app.keygate.metrics();
  t.match(metrics, /keygate_verifications_total\{[^}]*outcome="VALID"[^}]*\} [1-9]/);
  t.match(metrics, /keygate_analytics_events_dropped_total\{reason="analytics_off"\} [1-9]/, "without ClickHouse, events are counted");
});

t.test("a key disabled on the server is refused in the app once the invalidation arrives", async (t) => {
  await disabledPropagates(t, await pair(t, modules));
});

t.test("named limits and credits are shared exactly between the app and the server", async (t) => {
  await sharedExactly(t, await pair(t, modules));
});

t.test("an API's IP allowlist, set on the server, applies to the app's request.ip", async (t) => {
  const { app, call, createKey } = await pair(t, modules);
  const { key } = await createKey({ permissions: ["orders.read"] });
  t.equal((await app.inject({ url: "/orders", headers: bearer(key) })).statusCode, 200);
  await call("keygate.setApiIpAllowlist", { apiId: API, ipAllowlist: ["10.0.0.0/8"] });
  const refused = await waitFor("the app applies the allowlist", 5_000, async () => {
    const answer = await app.inject({ url: "/orders", headers: bearer(key) });
    return answer.statusCode === 200 ? undefined : answer;
  });
  t.equal(refused.statusCode, 403);
  t.match(refused.json().error.type, /ip_not_allowed$/);
  t.equal((await app.inject({ url: "/orders", headers: bearer(key), remoteAddress: "10.1.2.3" })).statusCode, 200);
});

t.test("options are checked as a server's configuration, route options as a gateway route's", async (t) => {
  const noRedis = Fastify({ logger: false });
  await t.rejects(async () => noRedis.register(keygate, {} as never).ready(), ConfigError);
  const badUrl = Fastify({ logger: false });
  await t.rejects(async () => badUrl.register(keygate, { redis: "http://127.0.0.1:6379" }).ready(), /storage\.redis\.url/);
  const twice = Fastify({ logger: false });
  await t.rejects(async () => twice.register(keygate, { redis: { url: REDIS_URL, cluster: { nodes: [REDIS_URL] } } }).ready(), ConfigError);

  const { app } = await pair(t, modules, { ratelimit: { fail: "closed" }, docsUrl: "https://docs.example.test/errors" });
  t.throws(() => app.get("/bad", { config: { keygate: { apiId: API, permissions: "orders.read AND" } } }, async () => ""), {
    name: "ConfigError",
    message: /route GET \/bad[\s\S]*permissions:/,
  });
  t.throws(() => app.keygate.preHandler({ apiId: "" }), /apiId: must name an API/);
  t.throws(
    () => app.keygate.preHandler({ apiId: API, ratelimits: [{ name: "x", limit: 5 }] }),
    /ratelimits\[0\]: must set limit and duration/,
  );
  const refused = await app.inject({ url: "/orders" });
  t.match(refused.json().error.type, /^https:\/\/docs\.example\.test\/errors/);
});

t.test("a ClickHouse server configured for analytics is where the app's verifications go", async (t) => {
  // Nothing listens there: the events wait in the buffer, as a server's do while its ClickHouse is away.
  const { app, createKey } = await pair(t, modules, { analytics: { clickhouse: { url: "http://127.0.0.1:17401" }, region: "edge" } });
  const { key } = await createKey({ permissions: ["orders.read"] });
  t.equal((await app.inject({ url: "/orders", headers: bearer(key) })).statusCode, 200);
  const metrics = await app.keygate.metrics();
  t.notMatch(metrics, /keygate_analytics_events_dropped_total\{reason="analytics_off"\} [1-9]/);
  t.match(metrics, /keygate_analytics_events_recorded_total [1-9]/);
});

t.test("a store failure is answered in the envelope; anything else is left to the app", async (t) => {
  const app = Fastify({ logger: false });
  t.teardown(() => app.close());
  let failure: Error = new KeygateError("err:unkey:application:service_unavailable", "Redis does not answer.");
  const services = {
    apis: { workspaceOf: async () => "ws_test" },
    ratelimit: { resolve: async () => [], check: async () => Promise.reject(failure) },
    verification: {
      verify: async () => {
        throw failure;
      },
    },
  };
  const guards = new RouteGuards({
    decider: new GatewayDecider(services, app.log),
    snapshot: new CurrentGatewaySnapshot(compileGatewaySnapshot({ routes: [], gateway: validateConfig({}).gateway })),
    docsUrl: "https://keygate.example.test",
    log: app.log,
  });
  app.get("/", { preHandler: guards.guard(compileRouteOptions({ apiId: API }, "root")) }, async () => "ok");
  const unavailable = await app.inject({ url: "/", headers: bearer("kg_anything") });
  t.equal(unavailable.statusCode, 500);
  t.equal(unavailable.json().error.detail, "Redis does not answer.");
  failure = new Error("a bug");
  const bug = await app.inject({ url: "/", headers: bearer("kg_anything") });
  t.equal(bug.statusCode, 500);
  t.equal(bug.json().message, "a bug", "Fastify's own error answer");
});
