import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { LONGEST_WINDOW_MS } from "../helpers/clock.js";
import { createKey } from "../helpers/fixtures.js";
import { type Harness, harness, STORAGE_KINDS, type StorageKind } from "../helpers/harness.js";
import { readAnswer } from "../helpers/http-client.js";
import { startUpstream, type Upstream } from "../helpers/upstream.js";

const API = "api_gateway_main";
const OTHER_API = "api_gateway_other";

interface Gateway {
  h: Harness;
  base: string;
  upstream: Upstream;
  /** A request through keygate; `key` goes in `Authorization: Bearer`. */
  send(
    path: string,
    options?: { key?: string; method?: string; headers?: Record<string, string>; body?: string },
  ): Promise<{ status: number; headers: Headers; body: any }>;
}

async function gateway(
  t: Test,
  storage: StorageKind,
  routes: (upstream: string) => unknown[],
  settings: Record<string, unknown> = {},
): Promise<Gateway> {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    storage,
    config: {
      apis: [
        { id: API, name: "gateway-main", workspaceId: "ws_test" },
        { id: OTHER_API, name: "gateway-other", workspaceId: "ws_test" },
      ],
      routes: routes(upstream.url),
      gateway: settings,
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  return {
    h,
    base,
    upstream,
    async send(path, options = {}) {
      const response = await fetch(`${base}${path}`, {
        method: options.method ?? "GET",
        headers: { ...(options.key ? { authorization: `Bearer ${options.key}` } : {}), ...options.headers },
        ...(options.body !== undefined ? { body: options.body } : {}),
      });
      return readAnswer(response);
    },
  };
}

for (const storage of STORAGE_KINDS) {
  t.test(`the gateway on ${storage} stores`, async (t) => {
    const gw = await gateway(t, storage, (upstream) => [
      {
        name: "orders",
        match: { prefix: "/orders" },
        upstream,
        apiId: API,
        permissions: "orders.read OR admin",
        forward: { keyId: "x-keygate-key-id", identity: "x-keygate-identity", externalId: "x-keygate-external-id" },
      },
      {
        name: "metered",
        match: { prefix: "/metered" },
        upstream,
        apiId: API,
        credits: { cost: 2 },
        ratelimits: [{ name: "requests", cost: 1 }],
      },
      {
        name: "namespaced",
        match: { prefix: "/ns" },
        upstream,
        apiId: API,
        credits: { cost: 1 },
        namespaceLimits: [
          { namespace: "per-key", identifier: "key", limit: 2, duration: LONGEST_WINDOW_MS },
          { namespace: "per-tenant", identifier: "header:x-tenant", limit: 3, duration: LONGEST_WINDOW_MS },
        ],
      },
      { name: "by-header", match: { prefix: "/header-key" }, upstream, apiId: API, key: { header: "x-api-key" } },
      { name: "by-query", match: { prefix: "/query-key" }, upstream, apiId: API, key: { query: "api_key" } },
      { name: "read-only", match: { prefix: "/readonly", methods: ["GET", "HEAD"] }, upstream, apiId: API },
      { name: "down", match: { prefix: "/down" }, upstream: "http://127.0.0.1:9", apiId: API, credits: { cost: 1 } },
      { name: "slow", match: { prefix: "/slow" }, upstream, apiId: API, credits: { cost: 1 }, timeoutMs: 300 },
      { name: "failing", match: { prefix: "/status" }, upstream, apiId: API, credits: { cost: 1 } },
    ]);
    const { h, send, upstream } = gw;
    const key = async (fields: Record<string, unknown> = {}) => createKey(h, API, { permissions: ["orders.read"], ...fields });
    const forwardedCount = () => upstream.seen.length;

    await t.test("an allowed request reaches the upstream without the key, with the caller's identity", async (t) => {
      const { key: secret, keyId } = await key({ externalId: "acme" });
      const response = await send("/orders/42?page=2", { key: secret, headers: { "x-forwarded-for": "10.1.1.1" } });
      t.equal(response.status, 200);
      t.equal(response.body.url, "/orders/42?page=2");
      t.equal(response.body.headers.authorization, undefined, "the key does not reach the upstream");
      t.equal(response.body.headers["x-keygate-key-id"], keyId);
      t.match(response.body.headers["x-keygate-identity"], /^id_/);
      t.equal(response.body.headers["x-keygate-external-id"], "acme");
      t.equal(response.body.headers["x-forwarded-for"], "10.1.1.1, 127.0.0.1", "keygate appends the client it saw");
      t.equal(response.body.headers["x-forwarded-proto"], "http");
      t.match(response.headers.get("x-request-id"), /^req_/);
    });

    await t.test("identity headers sent by the client are dropped, never forwarded", async (t) => {
      const { key: secret, keyId } = await key();
      const response = await send("/orders", {
        key: secret,
        headers: { "x-keygate-key-id": "key_forged", "x-keygate-identity": "id_forged", "x-keygate-external-id": "forged" },
      });
      t.equal(response.body.headers["x-keygate-key-id"], keyId);
      t.equal(response.body.headers["x-keygate-identity"], undefined, "a key without identity sends none, and the forged one is gone");
      t.equal(response.body.headers["x-keygate-external-id"], undefined);
    });

    await t.test("no key, and every kind of invalid key, is a 401 with WWW-Authenticate; nothing is forwarded", async (t) => {
      const before = forwardedCount();
      const missing = await send("/orders");
      t.equal(missing.status, 401);
      t.equal(missing.body.error.type, "/v2/errors/keygate/gateway/missing_key");
      t.equal(missing.headers.get("www-authenticate"), 'Bearer realm="orders"');
      t.equal((await send("/orders", { headers: { authorization: "Basic abc" } })).body.error.type.split("/").pop(), "missing_key");
      t.equal((await send("/orders", { key: "sk_not_a_real_key" })).body.error.type.split("/").pop(), "invalid_key");
      const disabled = await key({ enabled: false });
      t.equal((await send("/orders", { key: disabled.key })).body.error.type.split("/").pop(), "key_disabled");
      const expired = await key({ expires: 1 });
      const expiredResponse = await send("/orders", { key: expired.key });
      t.same([expiredResponse.status, expiredResponse.body.error.type.split("/").pop()], [401, "key_expired"]);
      const elsewhere = await createKey(h, OTHER_API, { permissions: ["orders.read"] });
      t.equal((await send("/orders", { key: elsewhere.key })).body.error.type.split("/").pop(), "invalid_key", "a key of another API");
      const deleted = await key();
      await h.call("keys.deleteKey", { keyId: deleted.keyId });
      t.equal((await send("/orders", { key: deleted.key })).status, 401, "a deleted key at once");
      t.equal(forwardedCount(), before, "none of these reached the upstream");
    });

    await t.test("a key without the route's permissions is a 403 that names the query", async (t) => {
      const { key: secret } = await createKey(h, API, { permissions: ["billing.read"] });
      const response = await send("/orders", { key: secret });
      t.equal(response.status, 403);
      t.equal(response.body.error.type.split("/").pop(), "insufficient_permissions");
      t.match(response.body.error.detail, /orders\.read OR admin/);
      const admin = await createKey(h, API, { permissions: ["admin"] });
      t.equal((await send("/orders", { key: admin.key })).status, 200, "the other alternative of the query");
    });

    await t.test("named limits: headers on every answer; a 429 describes the limit that denied and spends nothing", async (t) => {
      const { key: secret, keyId } = await key({
        credits: { remaining: 100 },
        ratelimits: [{ name: "requests", limit: 2, duration: LONGEST_WINDOW_MS }],
      });
      const first = await send("/metered", { key: secret });
      t.equal(first.status, 200);
      t.equal(first.headers.get("ratelimit-policy"), '"requests";q=2;w=2592000');
      t.match(first.headers.get("ratelimit"), /^"requests";r=1;t=\d+$/);
      t.same([first.headers.get("x-ratelimit-limit"), first.headers.get("x-ratelimit-remaining")], ["2", "1"]);
      t.equal((await send("/metered", { key: secret })).status, 200);
      const before = forwardedCount();
      const denied = await send("/metered", { key: secret });
      t.equal(denied.status, 429);
      t.equal(denied.body.error.type.split("/").pop(), "rate_limited");
      t.match(denied.headers.get("content-type"), /^application\/problem\+json/);
      t.match(denied.headers.get("retry-after"), /^\d+$/);
      t.match(denied.headers.get("ratelimit"), /^"requests";r=0;t=\d+$/);
      t.equal(forwardedCount(), before);
      t.equal(
        (await h.call("keys.getKey", { keyId })).body.data.credits.remaining,
        96,
        "2 credits per allowed request, none for the denied one",
      );
    });

    await t.test("credits: exhausted is a 429 usage_exceeded, with Retry-After when the balance refills", async (t) => {
      const plain = await key({ credits: { remaining: 2 }, ratelimits: [{ name: "requests", limit: 100, duration: 60_000 }] });
      t.equal((await send("/metered", { key: plain.key })).status, 200);
      const exhausted = await send("/metered", { key: plain.key });
      t.same([exhausted.status, exhausted.body.error.type.split("/").pop()], [429, "usage_exceeded"]);
      t.equal(exhausted.headers.get("retry-after"), null, "no refill, so no time to retry at");
      const refilling = await key({
        credits: { remaining: 0, refill: { interval: "daily", amount: 10 } },
        ratelimits: [{ name: "requests", limit: 100, duration: 60_000 }],
      });
      const waiting = await send("/metered", { key: refilling.key });
      t.equal(waiting.status, 429);
      const seconds = Number(waiting.headers.get("retry-after"));
      t.ok(seconds >= 1 && seconds <= 86_400, `retry after the next 00:00 UTC (${seconds} s)`);
    });

    await t.test("namespace limits count per key and per header value; a denial spends no credit", async (t) => {
      const a = await key({ credits: { remaining: 10 } });
      const b = await key({ credits: { remaining: 10 } });
      const statuses: number[] = [];
      for (const [secret, tenant] of [
        [a.key, "t1"],
        [a.key, "t1"],
        [a.key, "t2"],
        [b.key, "t1"],
        [b.key, "t1"],
      ] as const) {
        statuses.push((await send("/ns", { key: secret, headers: { "x-tenant": tenant } })).status);
      }
      t.same(statuses, [200, 200, 429, 200, 429], "a's third request hits per-key; b's second hits per-tenant t1 (3 used)");
      const denied = await send("/ns", { key: b.key, headers: { "x-tenant": "t1" } });
      t.match(denied.headers.get("ratelimit-policy"), /^"per-tenant";q=3;w=2592000$/, "the headers name the namespace that denied");
      t.equal((await h.call("keys.getKey", { keyId: a.keyId })).body.data.credits.remaining, 8);
      t.equal((await h.call("keys.getKey", { keyId: b.keyId })).body.data.credits.remaining, 9);
    });

    await t.test("an override set through the API applies to the gateway's namespace limit", async (t) => {
      const c = await key();
      t.equal(
        (await h.call("ratelimit.setOverride", { namespace: "per-key", identifier: c.keyId, limit: 5, duration: 60_000 })).status,
        200,
      );
      const d = await key();
      t.equal(
        (await h.call("ratelimit.setOverride", { namespace: "per-key", identifier: d.keyId, limit: 0, duration: 60_000 })).status,
        200,
      );
      // The instance that sets an override forgets what it knew of the namespace: its next request applies the
      // override, with no wait for NAMESPACE_FRESH_MS.
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await send("/ns", { key: c.key, headers: { "x-tenant": `c${i}` } })).status);
      t.same(statuses, [200, 200, 200, 200], "the override raises this key's limit to 5");
      t.equal((await send("/ns", { key: d.key, headers: { "x-tenant": "d" } })).status, 429, "a limit-0 override blocks");
    });

    await t.test("keys in another header or in the query string; a query key is not forwarded", async (t) => {
      const { key: secret } = await key();
      const byHeader = await send("/header-key/x", { headers: { "x-api-key": secret } });
      t.equal(byHeader.status, 200);
      t.equal(byHeader.body.headers["x-api-key"], undefined);
      t.equal((await send("/header-key/x", { key: secret })).status, 401, "the Authorization header is not where this route looks");
      t.match((await send("/header-key/x")).headers.get("www-authenticate"), /ApiKey realm="by-header", in="header", name="x-api-key"/);
      const byQuery = await send(`/query-key/items?api_key=${secret}&sort=asc`);
      t.equal(byQuery.status, 200);
      t.equal(byQuery.body.url, "/query-key/items?sort=asc");
    });

    await t.test("a route's methods: others are 405 with Allow; paths no route takes are 404; /v2 is untouched", async (t) => {
      const { key: secret } = await key();
      t.equal((await send("/readonly", { key: secret })).status, 200);
      const post = await send("/readonly", { key: secret, method: "POST", body: "{}" });
      t.same([post.status, post.headers.get("allow")], [405, "GET, HEAD"]);
      const nowhere = await send("/nowhere");
      t.same([nowhere.status, nowhere.body.error.type.split("/").pop()], [404, "route_not_found"]);
      t.equal((await send("/v2/liveness")).status, 200);
      t.equal((await send("/v2/nothing")).status, 404);
      t.equal((await send("/v2/apis.createApi")).status, 405);
    });

    await t.test("an upstream that refuses is a 502, one that is too slow a 504; their credits come back", async (t) => {
      const { key: secret, keyId } = await key({ credits: { remaining: 5 } });
      const down = await send("/down", { key: secret });
      t.same([down.status, down.body.error.type.split("/").pop()], [502, "upstream_unreachable"]);
      const slow = await send("/slow/2000", { key: secret });
      t.same([slow.status, slow.body.error.type.split("/").pop()], [504, "upstream_timeout"]);
      const failing = await send("/status/503", { key: secret });
      t.same([failing.status, failing.body], [503, { status: 503 }], "an upstream 5xx answer is passed on as it is");
      const fine = await send("/status/201", { key: secret });
      t.equal(fine.status, 201);
      t.equal(
        (await h.call("keys.getKey", { keyId })).body.data.credits.remaining,
        4,
        "only the request the upstream answered well kept its credit",
      );
    });
  });
}

t.test("credits are not given back when refunds are turned off", async (t) => {
  const gw = await gateway(
    t,
    "memory",
    (_upstream) => [{ name: "down", match: { prefix: "/down" }, upstream: "http://127.0.0.1:9", apiId: API, credits: { cost: 1 } }],
    {
      refundCreditsOnUpstreamFailure: false,
    },
  );
  const { key, keyId } = await createKey(gw.h, API, { credits: { remaining: 3 } });
  t.equal((await gw.send("/down", { key })).status, 502);
  t.equal((await gw.h.call("keys.getKey", { keyId })).body.data.credits.remaining, 2);
});
