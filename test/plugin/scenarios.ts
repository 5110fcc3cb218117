import type { FastifyInstance } from "fastify";
import type { Test } from "tap";
import type { buildApp as BuildApp } from "../../src/app.js";
import type { validateConfig as ValidateConfig } from "../../src/config/load.js";
import type keygatePlugin from "../../src/plugin/fastify.js";
import type { KeygatePrincipal } from "../../src/plugin/fastify.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";
import { waitFor } from "../helpers/wait.js";

// What a Fastify app with keygate's plugin and a keygate server on one Redis must do, whichever copy of keygate
// they come from: this repository's sources, or the package packed and installed in an empty directory.

export const API = "api_plugin_main";
export const OTHER_API = "api_plugin_other";
const ROOT_KEY = "root_plugin_scenarios";
const PATIENT_MS = 10_000;

/** Where keygate comes from: its main entry, its plugin and the Fastify next to them. */
export interface KeygateModules {
  buildApp: typeof BuildApp;
  validateConfig: typeof ValidateConfig;
  keygate: typeof keygatePlugin;
  Fastify: (options: { logger: false }) => FastifyInstance;
}

export interface Pair {
  server: FastifyInstance;
  app: FastifyInstance;
  prefix: string;
  /** POST /v2/<procedure> on the server with its root key: the body's data. */
  call(procedure: string, body: unknown): Promise<any>;
  createKey(fields: Record<string, unknown>, apiId?: string): Promise<{ key: string; keyId: string }>;
}

/** A keygate server and an app with the plugin on one Redis prefix, both closed when the test ends. */
export async function pair(t: Test, modules: KeygateModules, options: Record<string, unknown> = {}): Promise<Pair> {
  const prefix = uniquePrefix(t, "plugin");
  const config = modules.validateConfig({
    rootKeys: [{ key: ROOT_KEY, workspaceId: "ws_test", permissions: ["*"] }],
    apis: [
      { id: API, name: "plugin-main", workspaceId: "ws_test" },
      { id: OTHER_API, name: "plugin-other", workspaceId: "ws_test" },
    ],
    // A generous deadline: on a loaded machine a Redis answer later than the default 500 ms would hand the decision
    // to ratelimit.fail (local counters), and these scenarios are about the shared ones.
    storage: { redis: { url: REDIS_URL, prefix, commandTimeoutMs: PATIENT_MS } },
    analytics: { engine: "off" },
  });
  const server = await modules.buildApp(config, { logger: false });
  t.teardown(() => server.close());
  const app = await pluginApp(t, modules, { redis: { url: REDIS_URL, commandTimeoutMs: PATIENT_MS }, prefix, ...options });
  const call = async (procedure: string, body: unknown) => {
    const answer = await server.inject({
      method: "POST",
      url: `/v2/${procedure}`,
      headers: { authorization: `Bearer ${ROOT_KEY}`, "content-type": "application/json" },
      payload: JSON.stringify(body),
    });
    if (answer.statusCode !== 200) throw new Error(`${procedure}: ${answer.statusCode} ${answer.body}`);
    return answer.json().data;
  };
  return { server, app, prefix, call, createKey: (fields, apiId = API) => call("keys.createKey", { apiId, ...fields }) };
}

/** The app under test: its routes answer with the principal keygate left on the request. */
async function pluginApp(t: Test, modules: KeygateModules, options: Record<string, unknown>): Promise<FastifyInstance> {
  const app = modules.Fastify({ logger: false });
  t.teardown(() => app.close());
  await app.register(modules.keygate, options as never);
  const principal = async (request: { keygate: KeygatePrincipal | null }) => ({ principal: request.keygate });
  app.get("/orders", { config: { keygate: { apiId: API, permissions: "orders.read OR admin" } } }, principal);
  app.post("/orders", { config: { keygate: { apiId: API, permissions: "orders.write" } } }, principal);
  app.get("/metered", { config: { keygate: { apiId: API, ratelimits: [{ name: "requests" }], tags: ["plugin"] } } }, principal);
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

export function bearer(key: string) {
  return { authorization: `Bearer ${key}` };
}

/** A key made on the server verifies in the app; the principal; per-route permissions; keygate's refusals. */
export async function verifiesWithPrincipal(t: Test, { app, createKey }: Pair): Promise<void> {
  const { key, keyId } = await createKey({ name: "reader", permissions: ["orders.read"], meta: { plan: "pro" }, externalId: "customer_1" });
  const ok = await app.inject({ url: "/orders", headers: bearer(key) });
  t.equal(ok.statusCode, 200);
  const principal = ok.json().principal;
  t.match(principal, { keyId, apiId: API, workspaceId: "ws_test", name: "reader", subject: "customer_1" });
  t.same(principal.meta, { plan: "pro" });
  t.same(principal.permissions, ["orders.read"]);
  t.same(principal.roles, []);
  t.equal(principal.identity.externalId, "customer_1");
  t.notOk("credits" in principal, "a key without a balance shows no credits");

  const forbidden = await app.inject({ method: "POST", url: "/orders", headers: bearer(key) });
  t.equal(forbidden.statusCode, 403);
  t.match(forbidden.json().error, { type: /insufficient_permissions$/, detail: /It needs: orders\.write/ });
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
  const elsewhere = await createKey({ permissions: ["orders.read"] }, OTHER_API);
  t.equal((await app.inject({ url: "/orders", headers: bearer(elsewhere.key) })).statusCode, 401, "a key of another API is not found");
  t.equal((await app.inject({ url: "/missing-api", headers: bearer(key) })).statusCode, 401, "a route whose API does not exist");

  t.equal((await app.inject({ url: "/by-header", headers: { "x-api-key": key } })).statusCode, 200);
  const noHeader = await app.inject({ url: "/by-header", headers: bearer(key) });
  t.equal(noHeader.headers["www-authenticate"], 'ApiKey realm="GET /by-header", in="header", name="x-api-key"');
  t.equal((await app.inject({ url: `/by-query?api_key=${key}` })).statusCode, 200);
  t.equal((await app.inject({ url: "/by-query" })).statusCode, 401);
  t.equal((await app.inject({ url: "/factory" })).headers["www-authenticate"], 'Bearer realm="factory"');
  t.equal((await app.inject({ url: "/factory", headers: bearer(key) })).json().principal.keyId, keyId);
  t.equal((await app.inject({ url: "/with-own", headers: bearer(key) })).statusCode, 200);
  t.equal((await app.inject({ url: "/with-own-list" })).statusCode, 401, "keygate's check runs before the route's own");
  t.equal((await app.inject({ url: "/open" })).json().principal, null, "an unprotected route has no principal");
}

/** A key disabled through the server's /v2 is refused in the app once the invalidation reaches it. */
export async function disabledPropagates(t: Test, { app, call, createKey }: Pair): Promise<void> {
  const { key, keyId } = await createKey({ permissions: ["orders.read"] });
  t.equal((await app.inject({ url: "/orders", headers: bearer(key) })).statusCode, 200, "cached in the app");
  await call("keys.updateKey", { keyId, enabled: false });
  // A bound on the wait, not an expectation of speed: the bus delivers in milliseconds.
  const refused = await waitFor("the app refuses the disabled key", 5_000, async () => {
    const answer = await app.inject({ url: "/orders", headers: bearer(key) });
    return answer.statusCode === 200 ? undefined : answer;
  });
  t.equal(refused.statusCode, 401);
  t.match(refused.json().error.type, /key_disabled$/);
}

/** 1,000 concurrent requests split between app and server on a limit of 100 admit 100; credits likewise. */
export async function sharedExactly(t: Test, { app, call, createKey }: Pair): Promise<void> {
  const limited = await createKey({ ratelimits: [{ name: "requests", limit: 100, duration: 60_000, autoApply: false }] });
  const both = Array.from({ length: 1_000 }, (_, index) =>
    index % 2 === 0
      ? app.inject({ url: "/metered", headers: bearer(limited.key) }).then((answer) => answer.statusCode === 200)
      : call("keys.verifyKey", { key: limited.key, ratelimits: [{ name: "requests" }] }).then((data) => data.valid === true),
  );
  const admitted = (await Promise.all(both)).filter(Boolean).length;
  t.equal(admitted, 100, `exactly 100 of 1,000 admitted, app and server together (${admitted})`);
  const over = await app.inject({ url: "/metered", headers: bearer(limited.key) });
  t.equal(over.statusCode, 429);
  t.match(over.headers["content-type"], /problem\+json/);
  t.equal(over.headers["x-ratelimit-remaining"], "0");
  t.ok(over.headers["retry-after"]);
  t.match(over.json().error.type, /rate_limited$/);

  const paying = await createKey({ credits: { remaining: 50 } });
  const spent = Array.from({ length: 300 }, (_, index) =>
    index % 2 === 0
      ? app.inject({ url: "/paid", headers: bearer(paying.key) }).then((answer) => answer.statusCode === 200)
      : call("keys.verifyKey", { key: paying.key }).then((data) => data.valid === true),
  );
  t.equal((await Promise.all(spent)).filter(Boolean).length, 50, "50 credits admit exactly 50 requests across app and server");
  const broke = await app.inject({ url: "/paid", headers: bearer(paying.key) });
  t.equal(broke.statusCode, 429);
  t.match(broke.json().error.type, /usage_exceeded$/);
  t.equal((await call("keys.getKey", { keyId: paying.keyId })).credits.remaining, 0);

  const counted = await createKey({ credits: { remaining: 3 }, ratelimits: [{ name: "requests", limit: 10, duration: 60_000 }] });
  const first = await app.inject({ url: "/paid", headers: bearer(counted.key) });
  t.equal(first.json().principal.credits, 2, "the principal shows the balance after the request");
  const headed = await app.inject({ url: "/metered", headers: bearer(counted.key) });
  t.match(headed.headers.ratelimit, /"requests";r=\d+/, "the RateLimit headers of the applied limits");
}
