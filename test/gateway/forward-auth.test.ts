import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { parse } from "yaml";
import { ConfigError, validateConfig } from "../../src/config/load.js";
import type { GatewayRequestEvent, VerificationEvent } from "../../src/domain/analytics/events.js";
import { KeygateError } from "../../src/errors/keygate-error.js";
import { originalRequest } from "../../src/gateway/forward-auth.js";
import { recordingAnalytics } from "../helpers/analytics.js";
import { LONGEST_WINDOW_MS } from "../helpers/clock.js";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { parseScrape } from "../helpers/metrics.js";
import { recipe } from "../helpers/proxies.js";
import { startUpstream } from "../helpers/upstream.js";

// The forward-auth door asked directly, as a proxy would (docs/forward-auth.md); test/gateway/forward-auth-proxies.test.ts
// puts real nginx and Caddy in front of it.

const API = "api_forward_auth";
const DOOR = "/_keygate/auth";
const FORWARD = { keyId: "x-keygate-key-id", identity: "x-keygate-identity", externalId: "x-keygate-external-id" };

t.test("the original request is read from nginx's, ingress-nginx's or the X-Forwarded headers", async (t) => {
  t.same(originalRequest({ "x-original-uri": "/orders/1?page=2", "x-original-method": "post" }, "GET"), {
    method: "POST",
    url: "/orders/1?page=2",
    path: "/orders/1",
    query: "page=2",
    host: undefined,
  });
  t.same(originalRequest({ "x-forwarded-uri": "/orders", "x-forwarded-method": "DELETE", "x-forwarded-host": "api.example.com" }, "GET"), {
    method: "DELETE",
    url: "/orders",
    path: "/orders",
    query: "",
    host: "api.example.com",
  });
  t.same(
    originalRequest({ "x-original-url": "https://api.example.com/orders/../admin?x=1", "x-original-method": "GET" }, "GET"),
    { method: "GET", url: "/orders/../admin?x=1", path: "/orders/../admin", query: "x=1", host: "api.example.com" },
    "ingress-nginx's absolute URL: its target as sent (the dot segment is the door's to refuse), its host",
  );
  t.equal((originalRequest({ "x-original-uri": "/a" }, "PUT") as { method: string }).method, "PUT", "no method header: the auth request's");
  t.equal(
    (
      originalRequest(
        { "x-original-uri": "/a", "x-forwarded-uri": "/a", "x-forwarded-method": "GET", "x-original-method": "get" },
        "PUT",
      ) as { method: string }
    ).method,
    "GET",
    "both conventions, agreeing",
  );
  t.same(
    originalRequest({ authorization: "Bearer k" }, "PATCH", "/orders/1?x=1"),
    { method: "PATCH", url: "/orders/1?x=1", path: "/orders/1", query: "x=1", host: undefined },
    "Envoy's form: the target appended to the door's path, the method the auth request's",
  );
  t.match(
    (originalRequest({ "x-forwarded-uri": "/public" }, "GET", "/orders/1") as KeygateError).message,
    /door's path and the x-forwarded-uri header name different requests/,
  );
  const refusal = (headers: Record<string, string>) => {
    const result = originalRequest(headers, "GET");
    return result instanceof KeygateError ? `${result.code}: ${result.message}` : "accepted";
  };
  t.match(refusal({}), /^err:keygate:gateway:original_request_unknown: .*X-Original-URI/, "no original URI");
  t.match(refusal({ "x-original-uri": "/public", "x-forwarded-uri": "/orders" }), /name different requests/, "two that differ");
  t.match(refusal({ "x-original-uri": "/a", "x-original-method": "GET", "x-forwarded-method": "POST" }), /differ/);
  t.match(refusal({ "x-forwarded-uri": "orders" }), /not a request target/, "not a path");
  t.match(refusal({ "x-original-url": "/orders" }), /not a request target \(an absolute URL\)/);
});

t.test("a route without upstream is decision-only: nothing about forwarding may be set, and the door's path is checked", async (t) => {
  const problems = (raw: Record<string, unknown>) => {
    try {
      validateConfig(raw);
    } catch (error) {
      if (error instanceof ConfigError) return error.problems;
      throw error;
    }
    return [];
  };
  const route = { name: "decided", match: { prefix: "/decided" }, apiId: API };
  t.same(problems({ routes: [route] }), [], "a route without upstream");
  t.same(problems({ routes: [{ ...route, stripPrefix: true, timeoutMs: 1000 }] }), [
    "routes[0].stripPrefix: is about forwarding; a route without upstream is decision-only (forward auth)",
    "routes[0].timeoutMs: is about forwarding; a route without upstream is decision-only (forward auth)",
  ]);
  t.same(
    problems({ routes: [route, { ...route, name: "other", upstream: "http://127.0.0.1:1" }] }),
    ["routes[1].match: same prefix '/decided' and methods as routes[0]; give them different methods"],
    "a decision-only route and a forwarded one cannot share a prefix and method",
  );
  t.same(problems({ gateway: { forwardAuth: { path: "/v2/auth" } } }), [
    "gateway.forwardAuth.path: '/v2/auth' is the management API's (/v2)",
  ]);
  t.equal(validateConfig({}).gateway.forwardAuth.path, DOOR, "the door's default path");
});

async function door(
  t: Test,
  gateway: Record<string, unknown> = {},
  events: { gatewayRequests?: GatewayRequestEvent[]; verifications?: VerificationEvent[] } = {},
) {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    analytics: recordingAnalytics(events),
    config: {
      apis: [{ id: API, name: "forward-auth", workspaceId: "ws_test" }],
      routes: [
        {
          name: "orders",
          match: { prefix: "/orders" },
          upstream: upstream.url,
          apiId: API,
          permissions: "orders.read",
          forward: FORWARD,
          namespaceLimits: [{ namespace: "door-per-key", identifier: "key", limit: 2, duration: LONGEST_WINDOW_MS }],
        },
        { name: "decided", match: { prefix: "/decided", methods: ["GET"] }, apiId: API, credits: { cost: 1 }, forward: FORWARD },
        // A route whose prefix covers the door's path: the door comes first.
        { name: "underneath", match: { prefix: "/_keygate" }, upstream: upstream.url, workspaceId: "ws_test" },
      ],
      gateway: { trustProxy: "loopback", ...gateway },
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const ask = async (headers: Record<string, string>, method = "GET", path = DOOR) => {
    const response = await fetch(`${base}${path}`, { method, headers });
    const text = await response.text();
    return { status: response.status, headers: response.headers, body: text === "" ? undefined : JSON.parse(text) };
  };
  return { h, upstream, base, ask };
}

t.test("the door decides the original request on its route, and forwards nothing", async (t) => {
  const { h, upstream, ask } = await door(t);
  const { key, keyId } = await createKey(h, API, { externalId: "acme", permissions: ["orders.read"] });
  const { key: keyWithout } = await createKey(h, API);

  const missing = await ask({ "x-original-uri": "/orders/1", "x-original-method": "GET" });
  t.equal(missing.status, 401);
  t.equal(missing.body.error.type.endsWith("missing_key"), true);
  t.equal(missing.headers.get("www-authenticate"), 'Bearer realm="orders"');
  t.match(missing.headers.get("x-request-id"), /^req_/);

  const unknown = await ask({ "x-forwarded-uri": "/orders/1", "x-forwarded-method": "GET", authorization: "Bearer nope" });
  t.equal(unknown.status, 401, "an unknown key");
  t.ok(unknown.headers.get("www-authenticate"));

  const forbidden = await ask({ "x-original-uri": "/orders/1", authorization: `Bearer ${keyWithout}` });
  t.equal(forbidden.status, 403, "a key without the permission");
  t.match(forbidden.body.error.detail, /orders\.read/);

  const allowed = await ask({
    "x-original-uri": "/orders/1?page=2",
    "x-original-method": "POST",
    authorization: `Bearer ${key}`,
    // The client's forged identity: the answer names every forward header, so the proxy replaces it.
    "x-keygate-identity": "id_forged",
  });
  t.equal(allowed.status, 200);
  t.equal(allowed.body, undefined, "no body");
  t.equal(allowed.headers.get("x-keygate-key-id"), keyId);
  t.match(allowed.headers.get("x-keygate-identity"), /^id_/);
  t.equal(allowed.headers.get("x-keygate-external-id"), "acme");
  t.equal(allowed.headers.get("x-ratelimit-limit"), "2");
  t.equal(allowed.headers.get("x-ratelimit-remaining"), "1");
  t.match(allowed.headers.get("ratelimit"), /^"door-per-key";r=1;t=\d+$/);

  await ask({ "x-original-uri": "/orders/2", authorization: `Bearer ${key}` });
  const limited = await ask({ "x-original-uri": "/orders/3", authorization: `Bearer ${key}` });
  t.equal(limited.status, 429, "over the route's limit");
  t.ok(Number(limited.headers.get("retry-after")) >= 1, "Retry-After");
  t.equal(limited.headers.get("x-ratelimit-remaining"), "0");
  t.equal(limited.headers.get("content-type"), "application/problem+json; charset=utf-8");

  t.equal(upstream.seen.length, 0, "the door forwarded nothing, not even to the route under /_keygate that covers its path");
});

t.test("Envoy's form, the original target appended to the door's path, is decided as the headers' form is", async (t) => {
  const { h, upstream, base, ask } = await door(t);
  const { key, keyId } = await createKey(h, API, { permissions: ["orders.read"] });
  const allowed = await ask({ authorization: `Bearer ${key}` }, "GET", `${DOOR}/orders/1?page=2`);
  t.equal(allowed.status, 200);
  t.equal(allowed.headers.get("x-keygate-key-id"), keyId);
  t.equal((await ask({}, "GET", `${DOOR}/orders/1`)).status, 401);
  t.equal((await ask({ authorization: `Bearer ${key}` }, "GET", `${DOOR}/nothing`)).status, 404);
  t.equal(upstream.seen.length, 0, "the door forwarded nothing");
  const beside = await fetch(`${base}${DOOR}x/1`);
  await beside.arrayBuffer();
  t.equal(beside.status, 200, "a path that only begins like the door's is no door: the route under /_keygate forwards it");
  t.equal(upstream.seen.at(-1)?.url, `${DOOR}x/1`);
});

t.test("a path no route takes, a method no route takes, a dot segment and a missing original URI are refused", async (t) => {
  const { h, ask } = await door(t);
  const { key, keyId } = await createKey(h, API, { credits: { remaining: 10 } });
  const noRoute = await ask({ "x-original-uri": "/nothing/here", authorization: `Bearer ${key}` });
  t.equal(noRoute.status, 404, "never let through");
  t.equal(noRoute.body.error.type.endsWith("no_route"), true);
  const management = await ask({ "x-original-uri": "/v2/keys.createKey", authorization: `Bearer ${key}` });
  t.equal(management.status, 404, "the management API's path is no route's");

  const wrongMethod = await ask({ "x-original-uri": "/decided/1", "x-original-method": "DELETE", authorization: `Bearer ${key}` });
  t.equal(wrongMethod.status, 405);
  t.equal(wrongMethod.headers.get("allow"), "GET");

  const dots = await ask({ "x-original-uri": "/orders/%2e%2e/admin", authorization: `Bearer ${key}` });
  t.equal(dots.status, 400);
  t.equal(dots.body.error.type.endsWith("invalid_path"), true);

  const unsaid = await ask({ authorization: `Bearer ${key}` }, "POST");
  t.equal(unsaid.status, 400);
  t.equal(unsaid.body.error.type.endsWith("original_request_unknown"), true);

  const decided = await ask({ "x-forwarded-uri": "/decided/1", "x-forwarded-method": "GET", authorization: `Bearer ${key}` });
  t.equal(decided.status, 200, "a decision-only route, matched at the door");
  const { body } = await h.call("keys.getKey", { keyId });
  t.equal(body.data.credits.remaining, 9, "its credit spent at the decision, once, and never refunded");
});

t.test("the inline gateway does not take a decision-only route's path", async (t) => {
  const { base, upstream } = await door(t);
  const response = await fetch(`${base}/decided/1`);
  t.equal(response.status, 404, "left to the application, which serves nothing there");
  await response.arrayBuffer();
  t.equal(upstream.seen.length, 0);
});

t.test("Via naming keygate does not misfire at the door, and the door can be moved or closed", async (t) => {
  const { h, ask } = await door(t, { via: { pseudonym: "keygate-door-test", maxHops: 1 } });
  const { key } = await createKey(h, API, { permissions: ["orders.read"] });
  const looped = await ask({
    "x-original-uri": "/orders/1",
    authorization: `Bearer ${key}`,
    via: "1.1 keygate-door-test, 1.1 edge, 1.1 other",
  });
  t.equal(looped.status, 200, "the door forwards nothing, so no loop passes through it");

  const moved = await door(t, { forwardAuth: { path: "/auth/check" } });
  const { key: movedKey } = await createKey(moved.h, API, { permissions: ["orders.read"] });
  t.equal((await moved.ask({ "x-original-uri": "/orders/1", authorization: `Bearer ${movedKey}` }, "GET", "/auth/check")).status, 200);

  const closed = await door(t, { forwardAuth: { enabled: false } });
  const response = await fetch(`${closed.base}${DOOR}`, { headers: { "x-original-uri": "/orders/1" } });
  t.equal(response.status, 200, "a closed door's path is an ordinary path: here the route under /_keygate forwards it");
  await response.arrayBuffer();
  t.equal(closed.upstream.seen.at(-1)?.url, DOOR);
});

t.test("the door's decisions are gateway requests in analytics and in the metrics, under face forward_auth", async (t) => {
  const gatewayRequests: GatewayRequestEvent[] = [];
  const verifications: VerificationEvent[] = [];
  const { h, ask } = await door(t, {}, { gatewayRequests, verifications });
  const { key, keyId } = await createKey(h, API, { permissions: ["orders.read"] });
  const headers = { "x-forwarded-uri": "/orders/5?page=1", "x-forwarded-method": "PUT", "x-forwarded-host": "api.example.com" };
  t.equal((await ask({ ...headers, authorization: `Bearer ${key}` })).status, 200);
  t.equal((await ask(headers)).status, 401);
  const [allowed, refused] = gatewayRequests;
  t.match(allowed, {
    route: "orders",
    method: "PUT",
    host: "api.example.com",
    path: "/orders/5",
    queryString: "page=1",
    responseStatus: 200,
    keyId,
    outcome: "VALID",
    upstreamLatencyMs: 0,
    workspaceId: "ws_test",
  });
  t.match(refused, { route: "orders", path: "/orders/5", responseStatus: 401, keyId: "", outcome: "" });
  t.equal(verifications.length, 1, "the key's verification, as the inline gateway's");
  t.match(verifications[0], { keyId, outcome: "VALID" });

  const scrape = parseScrape((await h.app.inject({ method: "GET", url: "/metrics" })).body);
  t.equal(scrape.value("keygate_http_requests_total", { face: "forward_auth", route: "orders", status: "200" }), 1);
  t.equal(scrape.value("keygate_http_requests_total", { face: "forward_auth", route: "orders", status: "401" }), 1);
  t.equal(scrape.value("keygate_http_requests_total", { face: "gateway", route: "orders", status: "200" }), 0);
});

t.test("a route made through the API may not take a decision-only route's name, nor its prefix for its methods", async (t) => {
  const { h, upstream } = await door(t);
  const create = (fields: Record<string, unknown>) =>
    h.call("keygate.createRoute", { match: { prefix: "/decided" }, upstream: upstream.url, policies: [], ...fields });
  t.equal((await create({ name: "decided", match: { prefix: "/elsewhere" } })).status, 409, "its name");
  t.equal((await create({ name: "shadow" })).status, 409, "its prefix, for a method it takes");
  t.equal((await create({ name: "writer", match: { prefix: "/decided", methods: ["POST"] } })).status, 200, "another method");
});

t.test("the Traefik recipe asks the door of the keygate recipe and copies the headers its route answers with", async (t) => {
  const config = validateConfig(parse(recipe("keygate")));
  const traefik = parse(recipe("traefik")).http;
  const middleware = traefik.middlewares.keygate.forwardAuth;
  t.equal(new URL(middleware.address).pathname, config.gateway.forwardAuth.path, "the door's path");
  const prefix = /PathPrefix\(`([^`]+)`\)/.exec(traefik.routers.orders.rule)?.[1] ?? "";
  const route = config.routes.find((candidate) => prefix.startsWith(candidate.match.prefix));
  t.ok(route, `a route takes ${prefix}`);
  t.equal(route?.upstream, undefined, "decision-only: Traefik forwards");
  const answered = Object.values(route?.forward ?? {}).map((header) => header.toLowerCase());
  for (const header of middleware.authResponseHeaders as string[]) t.ok(answered.includes(header.toLowerCase()), `${header} is answered`);
  t.same(traefik.routers.orders.middlewares, ["keygate"]);
});

t.test("a route made through the API is decided at the door without a connection to its upstream", async (t) => {
  // An upstream on the operator's network the allowance lets routes of the API reach: the door never connects to it.
  const { h, ask } = await door(t, { apiRoutes: { allowedUpstreams: ["10.255.0.0/16"] } });
  const created = await h.call("keygate.createRoute", {
    name: "stored",
    match: { prefix: "/stored" },
    upstream: "http://10.255.255.1:9",
    policies: [{ name: "keys", enabled: true, keyauth: { keyspaces: [API], permissionQuery: "orders.read" } }],
    forward: { keyId: "x-keygate-key-id" },
  });
  t.equal(created.status, 200, JSON.stringify(created.body));
  const { key, keyId } = await createKey(h, API, { permissions: ["orders.read"] });
  const allowed = await ask({ "x-original-uri": "/stored/1", authorization: `Bearer ${key}` });
  t.equal(allowed.status, 200, "decided; nothing was sent upstream");
  t.equal(allowed.headers.get("x-keygate-key-id"), keyId);
  t.equal((await ask({ "x-original-uri": "/stored/1" })).status, 401);
});

t.test("an openapi policy checks the original's path, query and headers at the door, never a body", async (t) => {
  const { h, ask } = await door(t);
  const created = await h.call("keygate.createRoute", {
    name: "documented",
    match: { prefix: "/documented" },
    upstream: "http://127.0.0.1:9",
    policies: [{ name: "validate", enabled: true, openapi: {} }],
  });
  t.equal(created.status, 200);
  const document = {
    openapi: "3.1.0",
    info: { title: "documented", version: "1" },
    paths: {
      "/documented/items/{id}": {
        post: {
          parameters: [{ name: "id", in: "path", required: true, schema: { type: "integer" } }],
          requestBody: { required: true, content: { "application/json": { schema: { type: "object", required: ["name"] } } } },
          responses: { "200": { description: "ok" } },
        },
      },
    },
  };
  t.equal((await h.call("keygate.setRouteOpenApi", { route: "documented", document: JSON.stringify(document) })).status, 200);
  const asked = (path: string) => ask({ "x-original-uri": path, "x-original-method": "POST" }, "GET");
  t.equal((await asked("/documented/items/7")).status, 200, "no body to see (nginx sends none): not a missing body");
  const invalid = await asked("/documented/items/seven");
  t.equal(invalid.status, 400, "a path parameter that does not match");
  t.equal(invalid.body.error.errors[0].location, "path.id");
});
