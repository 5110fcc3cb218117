import type { AddressInfo } from "node:net";
import Fastify, { type FastifyInstance } from "fastify";
import t, { type Test } from "tap";
import keygate from "../../src/plugin/fastify.js";
import { createKey } from "../helpers/fixtures.js";
import { type Harness, harness } from "../helpers/harness.js";
import { readAnswer } from "../helpers/http-client.js";
import { REDIS_URL } from "../helpers/redis.js";
import { startUpstream, type Upstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

// A route's policies decide the same through the gateway and through a Fastify route under the plugin: the same
// code (GatewayDecider.access) runs them, so each policy kind gives the same status, envelope and headers at both
// doors. The plugin takes the policies inline (as keygate.createRoute takes them) or follows a stored route.

const API = "api_plugin_policies";

interface Answer {
  status: number;
  headers: Headers;
  body: any;
}

interface Doors {
  h: Harness;
  upstream: Upstream;
  /** The keygate server's gateway, and the Fastify app with the plugin, on one Redis prefix. */
  gateway(path: string, init?: RequestInit): Promise<Answer>;
  plugin(path: string, init?: RequestInit): Promise<Answer>;
}

async function fetchAnswer(url: string, init: RequestInit = {}): Promise<Answer> {
  const response = await fetch(url, init);
  return readAnswer(response);
}

/**
 * The server (its stored routes made by `routes`) and the app (its routes added by `appRoutes`), both listening.
 * The app is made once the stored routes exist, so that it starts with them.
 */
async function doors(
  t: Test,
  routes: (h: Harness, upstream: Upstream) => Promise<void>,
  appRoutes: (app: FastifyInstance) => void,
): Promise<Doors> {
  const upstream = await startUpstream(t);
  const h = await harness(t, { storage: "redis", config: { apis: [{ id: API, name: "plugin-policies", workspaceId: "ws_test" }] } });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  await routes(h, upstream);
  const app = Fastify({ logger: false });
  t.teardown(() => app.close());
  await app.register(keygate, { redis: REDIS_URL, prefix: h.config.storage.redis?.prefix as string });
  appRoutes(app);
  await app.listen({ port: 0, host: "127.0.0.1" });
  const base = (server: FastifyInstance) => `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
  return {
    h,
    upstream,
    gateway: (path, init) => fetchAnswer(`${base(h.app)}${path}`, init),
    plugin: (path, init) => fetchAnswer(`${base(app)}${path}`, init),
  };
}

async function createRoute(h: Harness, name: string, prefix: string, upstream: Upstream, policies: unknown[]): Promise<void> {
  const created = await h.call("keygate.createRoute", { name, match: { prefix }, upstream: upstream.url, policies });
  if (created.status !== 200) throw new Error(`createRoute failed: ${JSON.stringify(created.body)}`);
}

/** The app's handler: what the plugin let through, with its principal. */
const principal = async (request: { keygate: unknown }) => ({ principal: request.keygate });

const RATE_HEADERS = ["ratelimit-policy", "x-ratelimit-limit", "x-ratelimit-remaining"] as const;

/**
 * What must be the same at both doors: the status; for a refusal its envelope's type, title and detail, the content
 * type, and whether it challenges (WWW-Authenticate, whose realm names the route, which differs) and says when to
 * retry; the rate limit headers but their reset times (and namespace names).
 */
function shape(answer: Answer) {
  const error = answer.status >= 400 ? answer.body?.error : undefined;
  const headers: Record<string, string | null> = {};
  for (const name of RATE_HEADERS) headers[name] = answer.headers.get(name);
  // The policy header names the namespace, which differs where each door counts in one of its own.
  headers["ratelimit-policy"] = headers["ratelimit-policy"]?.replace(/^"[^"]*"/, "namespace") ?? null;
  return {
    status: answer.status,
    ...(error
      ? {
          type: error.type,
          title: error.title,
          detail: error.detail,
          contentType: answer.headers.get("content-type"),
          challenges: answer.headers.get("www-authenticate")?.replace(/realm="[^"]*"/, "realm") ?? null,
          retryAfter: answer.headers.has("retry-after"),
          requestIdMatches: answer.headers.get("x-request-id") === answer.body?.meta?.requestId,
        }
      : {}),
    headers,
  };
}

/** Sends each request through both doors in turn; the answers must have the same shape. */
async function sameAtBothDoors(
  t: Test,
  d: Doors,
  steps: { name: string; gateway: string; plugin: string; init?: RequestInit; status: number }[],
) {
  for (const step of steps) {
    const viaGateway = await d.gateway(step.gateway, step.init);
    const viaPlugin = await d.plugin(step.plugin, step.init);
    t.equal(viaGateway.status, step.status, `${step.name}: ${step.status} through the gateway (${JSON.stringify(viaGateway.body)})`);
    t.same(shape(viaPlugin), shape(viaGateway), `${step.name}: the same through the plugin`);
  }
}

t.test("a keyauth policy: the same refusals and answers through the plugin as through the gateway", async (t) => {
  const policies = [
    {
      name: "auth",
      enabled: true,
      keyauth: { keyspaces: [API], permissionQuery: "orders.read", locations: [{ header: { name: "x-api-key" } }] },
    },
  ];
  const d = await doors(
    t,
    (h, upstream) => createRoute(h, "keyed", "/keyed", upstream, policies),
    (app) => app.get("/keyed/orders", { config: { keygate: { policies } } }, principal),
  );
  const reader = await createKey(d.h, API, { permissions: ["orders.read"] });
  const other = await createKey(d.h, API, { permissions: ["orders.write"] });
  const disabled = await createKey(d.h, API, { permissions: ["orders.read"], enabled: false });
  const path = "/keyed/orders";
  await sameAtBothDoors(t, d, [
    { name: "no key", gateway: path, plugin: path, status: 401 },
    { name: "an unknown key", gateway: path, plugin: path, init: { headers: { "x-api-key": "kg_unknown" } }, status: 401 },
    { name: "a disabled key", gateway: path, plugin: path, init: { headers: { "x-api-key": disabled.key } }, status: 401 },
    { name: "a key without the permission", gateway: path, plugin: path, init: { headers: { "x-api-key": other.key } }, status: 403 },
    { name: "a key that passes", gateway: path, plugin: path, init: { headers: { "x-api-key": reader.key } }, status: 200 },
  ]);
  const allowed = await d.plugin(path, { headers: { "x-api-key": reader.key } });
  t.equal(allowed.body.principal.keyId, reader.keyId, "the principal on request.keygate");
});

t.test("a rate limit policy with compound identifiers counts alike through the plugin and the gateway", async (t) => {
  // Each door counts in a namespace of its own, so that both see the same sequence.
  const policies = (namespace: string) => [
    {
      name: "per-tenant-and-address",
      enabled: true,
      ratelimit: { limit: 2, windowMs: 60_000, identifiers: [{ header: { name: "x-tenant" } }, { remoteIp: {} }], namespace },
    },
  ];
  const d = await doors(
    t,
    (h, upstream) => createRoute(h, "limited", "/limited", upstream, policies("limited.gateway")),
    (app) => app.get("/limited/orders", { config: { keygate: { apiId: API, policies: policies("limited.plugin") } } }, principal),
  );
  const path = "/limited/orders";
  const tenant = (name: string) => ({ headers: { "x-tenant": name } });
  await sameAtBothDoors(t, d, [
    { name: "tenant a, first", gateway: path, plugin: path, init: tenant("a"), status: 200 },
    { name: "tenant a, second", gateway: path, plugin: path, init: tenant("a"), status: 200 },
    { name: "tenant a, third: over the limit", gateway: path, plugin: path, init: tenant("a"), status: 429 },
    { name: "tenant b counts apart", gateway: path, plugin: path, init: tenant("b"), status: 200 },
  ]);
  const limited = await d.plugin(path, tenant("a"));
  t.equal(limited.headers.get("x-ratelimit-remaining"), "0");
  t.match(limited.body.error.type, /rate_limited$/);
});

t.test("firewall policies with IP lists refuse alike through the plugin and the gateway", async (t) => {
  const deny = [{ name: "no-loopback", enabled: true, firewall: { action: "ACTION_DENY" as const, ipDeny: ["127.0.0.0/8"] } }];
  const allowOthers = [{ name: "private-only", enabled: true, firewall: { action: "ACTION_DENY" as const, ipAllow: ["10.0.0.0/8"] } }];
  const allowLoopback = [
    { name: "loopback-only", enabled: true, firewall: { action: "ACTION_DENY" as const, ipAllow: ["127.0.0.1", "::1"] } },
  ];
  const d = await doors(
    t,
    async (h, upstream) => {
      await createRoute(h, "denied", "/denied", upstream, deny);
      await createRoute(h, "elsewhere", "/elsewhere", upstream, allowOthers);
      await createRoute(h, "loopback", "/loopback", upstream, allowLoopback);
    },
    (app) => {
      app.get("/denied/x", { config: { keygate: { apiId: API, policies: deny } } }, principal);
      app.get("/elsewhere/x", { config: { keygate: { apiId: API, policies: allowOthers } } }, principal);
      app.get("/loopback/x", { config: { keygate: { apiId: API, policies: allowLoopback } } }, principal);
    },
  );
  await sameAtBothDoors(t, d, [
    { name: "a denied range", gateway: "/denied/x", plugin: "/denied/x", status: 403 },
    { name: "outside the allowed range", gateway: "/elsewhere/x", plugin: "/elsewhere/x", status: 403 },
    { name: "inside the allowed range", gateway: "/loopback/x", plugin: "/loopback/x", status: 200 },
  ]);
});

t.test("a cors policy puts the same CORS headers on every answer through the plugin as through the gateway", async (t) => {
  const policies = [
    { name: "browsers", enabled: true, cors: { allowOrigins: [{ exact: "https://app.example" }], exposeHeaders: ["x-request-id"] } },
    { name: "auth", enabled: true, keyauth: { keyspaces: [API] } },
  ];
  const d = await doors(
    t,
    (h, upstream) => createRoute(h, "browsed", "/browsed", upstream, policies),
    (app) => app.get("/browsed/x", { config: { keygate: { policies } } }, principal),
  );
  const { key } = await createKey(d.h, API);
  const cors = (answer: Answer) => ({
    status: answer.status,
    allowOrigin: answer.headers.get("access-control-allow-origin"),
    expose: answer.headers.get("access-control-expose-headers"),
    vary: answer.headers.get("vary"),
  });
  for (const [name, headers] of [
    ["a refusal (no key) to an allowed origin", { origin: "https://app.example" }],
    ["an allowed request from an allowed origin", { origin: "https://app.example", authorization: `Bearer ${key}` }],
    ["an allowed request from another origin", { origin: "https://elsewhere.example", authorization: `Bearer ${key}` }],
  ] as const) {
    const viaGateway = cors(await d.gateway("/browsed/x", { headers }));
    t.same(cors(await d.plugin("/browsed/x", { headers })), viaGateway, `${name}: the same through the plugin`);
  }
  const refused = cors(await d.plugin("/browsed/x", { headers: { origin: "https://app.example" } }));
  t.equal(refused.status, 401);
  t.equal(refused.allowOrigin, "https://app.example", "a page on the allowed origin can read keygate's refusal");
  // A preflight is answered without a key, as the gateway answers it.
  const preflight = (answer: Answer) => ({
    status: answer.status,
    allowOrigin: answer.headers.get("access-control-allow-origin"),
    allowHeaders: answer.headers.get("access-control-allow-headers"),
    vary: answer.headers.get("vary"),
    type: answer.status >= 400 ? answer.body?.error?.type : undefined,
  });
  const asking = (origin: string): RequestInit => ({
    method: "OPTIONS",
    headers: { origin, "access-control-request-method": "GET", "access-control-request-headers": "authorization" },
  });
  for (const [name, origin, status] of [
    ["a preflight from an allowed origin", "https://app.example", 204],
    ["a preflight from another origin", "https://elsewhere.example", 403],
  ] as const) {
    const viaGateway = preflight(await d.gateway("/browsed/x", asking(origin)));
    t.equal(viaGateway.status, status, `${name}: ${status} through the gateway`);
    t.same(preflight(await d.plugin("/browsed/x", asking(origin))), viaGateway, `${name}: the same through the plugin`);
  }
  const methods = await d.plugin("/browsed/x", asking("https://app.example"));
  t.match(methods.headers.get("access-control-allow-methods"), /GET/, "the methods the route takes");
  t.equal((await d.plugin("/browsed/x", { method: "OPTIONS" })).status, 404, "an OPTIONS request that is no preflight is not found");
});

t.test("an openapi policy of a stored route validates alike through the plugin and the gateway", async (t) => {
  const document = {
    openapi: "3.1.0",
    info: { title: "items", version: "1" },
    paths: {
      "/items": {
        get: {
          parameters: [{ name: "limit", in: "query", required: true, schema: { type: "integer", minimum: 1 } }],
          responses: { "200": { description: "ok" } },
        },
        post: {
          requestBody: {
            required: true,
            content: { "application/json": { schema: { type: "object", required: ["name"], properties: { name: { type: "string" } } } } },
          },
          responses: { "200": { description: "ok" } },
        },
      },
    },
  };
  const d = await doors(
    t,
    async (h, upstream) => {
      await createRoute(h, "items", "/items", upstream, [{ name: "validate", enabled: true, openapi: {} }]);
      const uploaded = await h.call("keygate.setRouteOpenApi", { route: "items", document: JSON.stringify(document) });
      if (uploaded.status !== 200) throw new Error(`setRouteOpenApi failed: ${JSON.stringify(uploaded.body)}`);
    },
    (app) => {
      app.get("/items", { config: { keygate: { route: "items" } } }, principal);
      app.post("/items", { config: { keygate: { route: "items" } } }, principal);
    },
  );
  const json = (body: unknown): RequestInit => ({
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  await sameAtBothDoors(t, d, [
    { name: "a query parameter out of range", gateway: "/items?limit=0", plugin: "/items?limit=0", status: 400 },
    { name: "a required query parameter missing", gateway: "/items", plugin: "/items", status: 400 },
    { name: "a valid query", gateway: "/items?limit=5", plugin: "/items?limit=5", status: 200 },
    { name: "a body without a required field", gateway: "/items", plugin: "/items", init: json({ title: "x" }), status: 400 },
    { name: "a valid body", gateway: "/items", plugin: "/items", init: json({ name: "x" }), status: 200 },
  ]);
  const invalid = await d.plugin("/items?limit=0");
  t.match(invalid.body.error.errors, [{ location: String, message: String }], "errors[] names each problem");
});

t.test("a route that follows a stored route takes up a change of its policies", async (t) => {
  const keyauth = { name: "auth", enabled: true, keyauth: { keyspaces: [API] } };
  const d = await doors(
    t,
    (h, upstream) => createRoute(h, "followed", "/followed", upstream, [keyauth]),
    (app) => app.get("/followed/x", { config: { keygate: { route: "followed" } } }, principal),
  );
  const { key } = await createKey(d.h, API);
  const headers = { authorization: `Bearer ${key}` };
  t.equal((await d.plugin("/followed/x", { headers })).status, 200, "the stored route's keyauth lets the key through");
  t.equal((await d.plugin("/followed/x")).status, 401, "and wants a key");
  const changed = await d.h.call("keygate.setRoutePolicies", {
    route: "followed",
    policies: [{ name: "closed", enabled: true, firewall: { action: "ACTION_DENY" } }, keyauth],
  });
  t.equal(changed.status, 200);
  const refused = await waitFor("the app to take up the stored route's change", 10_000, async (because) => {
    const answer = await d.plugin("/followed/x", { headers });
    if (answer.status !== 403) because(`still ${answer.status}`);
    return answer.status === 403 ? answer : undefined;
  });
  t.match(refused.body.error.type, /request_denied$/);
  t.match(refused.body.error.detail, /'closed'/);
});

t.test("a route naming a stored route that does not exist refuses every request", async (t) => {
  const d = await doors(
    t,
    async () => {},
    (app) => app.get("/nowhere", { config: { keygate: { route: "no-such-route" } } }, principal),
  );
  const answer = await d.plugin("/nowhere");
  t.equal(answer.status, 403);
  t.match(answer.body.error.type, /request_denied$/);
  t.match(answer.body.error.detail, /no-such-route/);
});

t.test("policies are checked when the route is registered, each problem named by its field", async (t) => {
  const app = Fastify({ logger: false });
  t.teardown(() => app.close());
  await app.register(keygate, { redis: REDIS_URL, prefix: "keygate_plugin_policies_checks" });
  t.throws(
    () =>
      app.keygate.preHandler({
        policies: [{ name: "x", enabled: true, ratelimit: { limit: 0, windowMs: 1000, identifiers: [{ remoteIp: {} }] } }],
      } as never),
    /policies\[0\]\.ratelimit\.limit/,
  );
  t.throws(() => app.keygate.preHandler({ policies: [{ name: "x", enabled: true }] }), /policies\[0\]: must set exactly one of/);
  // Mixed forms are type errors; a JavaScript app gets them thrown.
  t.throws(() => app.keygate.preHandler({ route: "r", policies: [] } as never), /route: names a stored route/);
  t.throws(() => app.keygate.preHandler({ route: "r", permissions: "a" } as never), /permissions: is a field of the apiId shorthand/);
  t.throws(() => app.keygate.preHandler({} as never), /apiId: must name an API/);
  t.throws(
    () => app.keygate.preHandler({ policies: [{ name: "x", enabled: true, firewall: { action: "ACTION_DENY" } }] }),
    /apiId: must name the API whose workspace the route serves/,
  );
});
