import Fastify, { type FastifyInstance } from "fastify";
import t, { type Test } from "tap";
import { ConfigError } from "../../src/config/load.js";
import { KeygateError } from "../../src/errors/keygate-error.js";
import keygate, { type KeygatePrincipal } from "../../src/plugin/fastify.js";
import { RouteGuards } from "../../src/plugin/route-guard.js";
import { createKey } from "../helpers/fixtures.js";
import { type Harness, harness } from "../helpers/harness.js";
import { REDIS_URL } from "../helpers/redis.js";
import { waitFor } from "../helpers/wait.js";

// A Fastify app with the plugin and a keygate server on one Redis and prefix: keys made on the server verify in
// the app, limits and credits are shared exactly, refusals are keygate's.

const API = "api_plugin_main";
const OTHER_API = "api_plugin_other";

async function server(t: Test): Promise<Harness> {
  return harness(t, {
    storage: "redis",
    config: {
      apis: [
        { id: API, name: "plugin-main", workspaceId: "ws_test" },
        { id: OTHER_API, name: "plugin-other", workspaceId: "ws_test" },
      ],
    },
  });
}

/** The app under test: its routes answer with the principal keygate left on the request. */
async function pluginApp(t: Test, h: Harness, options: Record<string, unknown> = {}): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });
  t.teardown(() => app.close());
  await app.register(keygate, { redis: REDIS_URL, prefix: h.config.storage.redis?.prefix as string, ...options });
  const principal = async (request: { keygate: KeygatePrincipal | null }) => ({ principal: request.keygate });
  app.get("/orders", { config: { keygate: { apiId: API, permissions: "orders.read OR admin" } } }, principal);
  app.post("/orders", { config: { keygate: { apiId: API, permissions: "orders.write" } } }, principal);
  app.get(
    "/metered",
    { config: { keygate: { apiId: API, ratelimits: [{ name: "requests" }], credits: { cost: 1 }, tags: ["plugin"] } } },
    principal,
  );
  app.get("/paid", { config: { keygate: { apiId: API, credits: { cost: 1 } } } }, principal);
  app.get("/by-header", { config: { keygate: { apiId: API, key: { header: "x-api-key" } } } }, principal);
  app.get("/by-query", { config: { keygate: { apiId: API, key: { query: "api_key" } } } }, principal);
  app.get("/missing-api", { config: { keygate: { apiId: "api_does_not_exist" } } }, principal);
  const own = async () => {};
  app.get("/factory", { preHandler: [app.keygate.preHandler({ apiId: API }, "factory")] }, principal);
  app.get("/with-own", { preHandler: own, config: { keygate: { apiId: API } } }, principal);
  app.get("/with-own-list", { preHandler: [own], config: { keygate: { apiId: API } } }, principal);
  app.get("/open", principal);
  return app;
}

function bearer(key: string) {
  return { authorization: `Bearer ${key}` };
}

t.test("keys made on a keygate server verify in the app, with the principal and keygate's refusals", async (t) => {
  const h = await server(t);
  const app = await pluginApp(t, h);
  const { key, keyId } = await createKey(h, API, {
    name: "reader",
    permissions: ["orders.read"],
    meta: { plan: "pro" },
    externalId: "customer_1",
  });

  const ok = await app.inject({ url: "/orders", headers: bearer(key) });
  t.equal(ok.statusCode, 200);
  const principal = ok.json().principal;
  t.equal(principal.keyId, keyId);
  t.equal(principal.apiId, API);
  t.equal(principal.workspaceId, "ws_test");
  t.equal(principal.name, "reader");
  t.same(principal.meta, { plan: "pro" });
  t.same(principal.permissions, ["orders.read"]);
  t.same(principal.roles, []);
  t.equal(principal.identity.externalId, "customer_1");
  t.equal(principal.subject, "customer_1");
  t.notOk("credits" in principal, "a key without a balance shows no credits");

  const forbidden = await app.inject({ method: "POST", url: "/orders", headers: bearer(key) });
  t.equal(forbidden.statusCode, 403);
  t.equal(forbidden.json().error.type.endsWith("insufficient_permissions"), true);
  t.match(forbidden.json().error.detail, /It needs: orders\.write/);
  t.equal(forbidden.json().meta.requestId, forbidden.headers["x-request-id"]);

  const missing = await app.inject({ url: "/orders" });
  t.equal(missing.statusCode, 401);
  t.equal(missing.headers["www-authenticate"], 'Bearer realm="GET /orders"');
  t.match(missing.headers["content-type"], /^application\/json/);
  t.match(missing.json(), { meta: { requestId: String }, error: { status: 401, title: String, detail: /Bearer <key>/ } });

  const invalid = await app.inject({ url: "/orders", headers: bearer("kg_not_a_key") });
  t.equal(invalid.statusCode, 401);
  t.match(invalid.json().error.type, /invalid_key$/);
  t.ok(invalid.headers["www-authenticate"]);

  const elsewhere = await createKey(h, OTHER_API, { permissions: ["orders.read"] });
  t.equal((await app.inject({ url: "/orders", headers: bearer(elsewhere.key) })).statusCode, 401, "a key of another API is not found");
  t.equal((await app.inject({ url: "/missing-api", headers: bearer(key) })).statusCode, 401, "a route whose API does not exist");

  t.equal((await app.inject({ url: "/by-header", headers: { "x-api-key": key } })).statusCode, 200);
  const noHeader = await app.inject({ url: "/by-header", headers: bearer(key) });
  t.equal(noHeader.headers["www-authenticate"], 'ApiKey realm="GET /by-header", in="header", name="x-api-key"');
  t.equal((await app.inject({ url: `/by-query?api_key=${key}` })).statusCode, 200);
  t.equal((await app.inject({ url: "/by-query" })).statusCode, 401);
  const factory = await app.inject({ url: "/factory" });
  t.equal(factory.headers["www-authenticate"], 'Bearer realm="factory"');
  t.equal((await app.inject({ url: "/factory", headers: bearer(key) })).json().principal.keyId, keyId);
  t.equal((await app.inject({ url: "/with-own", headers: bearer(key) })).statusCode, 200);
  t.equal((await app.inject({ url: "/with-own-list" })).statusCode, 401, "keygate's check runs before the route's own");
  t.equal((await app.inject({ url: "/open" })).json().principal, null, "an unprotected route has no principal");

  const metrics = await app.keygate.metrics();
  t.match(metrics, /keygate_verifications_total\{[^}]*outcome="VALID"[^}]*\} [1-9]/);
  t.match(metrics, /keygate_analytics_events_dropped_total\{reason="analytics_off"\} [1-9]/, "without ClickHouse, events are counted");
});

t.test("a key disabled on the server is refused in the app once the invalidation arrives", async (t) => {
  const h = await server(t);
  const app = await pluginApp(t, h);
  const { key, keyId } = await createKey(h, API, { permissions: ["orders.read"] });
  t.equal((await app.inject({ url: "/orders", headers: bearer(key) })).statusCode, 200, "cached in the app");
  const updated = await h.call("keys.updateKey", { keyId, enabled: false });
  t.equal(updated.status, 200);
  const refused = await waitFor("the app refuses the disabled key", 5_000, async () => {
    const answer = await app.inject({ url: "/orders", headers: bearer(key) });
    return answer.statusCode === 200 ? undefined : answer;
  });
  t.equal(refused.statusCode, 401);
  t.match(refused.json().error.type, /key_disabled$/);
});

t.test("named limits and credits are shared exactly between the app and the server", async (t) => {
  const h = await server(t);
  const app = await pluginApp(t, h);
  const limited = await createKey(h, API, { ratelimits: [{ name: "requests", limit: 100, duration: 60_000, autoApply: false }] });
  const both = Array.from({ length: 1_000 }, (_, index) =>
    index % 2 === 0
      ? app.inject({ url: "/metered", headers: bearer(limited.key) }).then((answer) => answer.statusCode === 200)
      : h
          .call("keys.verifyKey", { key: limited.key, ratelimits: [{ name: "requests" }] })
          .then((answer) => answer.body.data.valid === true),
  );
  const admitted = (await Promise.all(both)).filter(Boolean).length;
  t.equal(admitted, 100, "1,000 concurrent requests on a limit of 100, split between app and server, admit exactly 100");
  const over = await app.inject({ url: "/metered", headers: bearer(limited.key) });
  t.equal(over.statusCode, 429);
  t.match(over.headers["content-type"], /problem\+json/);
  t.equal(over.headers["x-ratelimit-remaining"], "0");
  t.ok(over.headers["retry-after"]);
  t.match(over.json().error.type, /rate_limited$/);

  const paying = await createKey(h, API, { credits: { remaining: 50 } });
  const spent = Array.from({ length: 300 }, (_, index) =>
    index % 2 === 0
      ? app.inject({ url: "/paid", headers: bearer(paying.key) }).then((answer) => answer.statusCode === 200)
      : h.call("keys.verifyKey", { key: paying.key }).then((answer) => answer.body.data.valid === true),
  );
  t.equal((await Promise.all(spent)).filter(Boolean).length, 50, "50 credits admit exactly 50 requests across app and server");
  const broke = await app.inject({ url: "/paid", headers: bearer(paying.key) });
  t.equal(broke.statusCode, 429);
  t.match(broke.json().error.type, /usage_exceeded$/);
  const after = await h.call("keys.getKey", { keyId: paying.keyId });
  t.equal(after.body.data.credits.remaining, 0);

  const counted = await createKey(h, API, {
    credits: { remaining: 3 },
    ratelimits: [{ name: "requests", limit: 10, duration: 60_000, autoApply: false }],
  });
  const first = await app.inject({ url: "/metered", headers: bearer(counted.key) });
  t.equal(first.json().principal.credits, 2, "the principal shows the balance after the request");
  t.match(first.headers.ratelimit, /"requests";r=\d+/, "the RateLimit headers of the applied limits");
});

t.test("options are checked as a server's configuration, route options as a gateway route's", async (t) => {
  const h = await server(t);
  const noRedis = Fastify({ logger: false });
  await t.rejects(async () => noRedis.register(keygate, {} as never).ready(), ConfigError);
  const badUrl = Fastify({ logger: false });
  await t.rejects(async () => badUrl.register(keygate, { redis: "http://127.0.0.1:6379" }).ready(), /storage\.redis\.url/);
  const twice = Fastify({ logger: false });
  await t.rejects(async () => twice.register(keygate, { redis: { url: REDIS_URL, cluster: { nodes: [REDIS_URL] } } }).ready(), ConfigError);

  const app = await pluginApp(t, h, { ratelimit: { fail: "closed" }, docsUrl: "https://docs.example.test/errors" });
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
  const h = await server(t);
  // Nothing listens there: the events wait in the buffer, as a server's do while its ClickHouse is away.
  const app = await pluginApp(t, h, { analytics: { clickhouse: { url: "http://127.0.0.1:17401" }, region: "edge" } });
  const { key } = await createKey(h, API, { permissions: ["orders.read"] });
  t.equal((await app.inject({ url: "/orders", headers: bearer(key) })).statusCode, 200);
  const metrics = await app.keygate.metrics();
  t.notMatch(metrics, /keygate_analytics_events_dropped_total\{reason="analytics_off"\} [1-9]/);
  t.match(metrics, /keygate_analytics_events_recorded_total [1-9]/);
});

t.test("a store failure is answered in the envelope; anything else is left to the app", async (t) => {
  const app = Fastify({ logger: false });
  t.teardown(() => app.close());
  let failure: Error = new KeygateError("err:unkey:application:service_unavailable", "Redis does not answer.");
  const guards = new RouteGuards(
    {
      apis: { workspaceOf: async () => "ws_test" },
      verification: {
        verify: async () => {
          throw failure;
        },
      },
    },
    "https://keygate.example.test",
    app.log,
  );
  const { compileRouteOptions } = await import("../../src/plugin/options.js");
  app.get("/", { preHandler: guards.guard(compileRouteOptions({ apiId: API }, "root"), "root") }, async () => "ok");
  const unavailable = await app.inject({ url: "/", headers: bearer("kg_anything") });
  t.equal(unavailable.statusCode, 500);
  t.equal(unavailable.json().error.detail, "Redis does not answer.");
  failure = new Error("a bug");
  const bug = await app.inject({ url: "/", headers: bearer("kg_anything") });
  t.equal(bug.statusCode, 500);
  t.equal(bug.json().message, "a bug", "Fastify's own error answer");
});
