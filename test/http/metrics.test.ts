import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { createApi, createKey } from "../helpers/fixtures.js";
import { type Harness, harness } from "../helpers/harness.js";
import { parseScrape, type Scrape } from "../helpers/metrics.js";
import { freePort } from "../helpers/ports.js";
import { startUpstream } from "../helpers/upstream.js";

// GET /metrics after real traffic: each counter moves by exactly the requests made, labels stay bounded.

const API = "api_metrics";

async function scrape(h: Harness, headers: Record<string, string> = {}): Promise<Scrape> {
  const response = await h.app.inject({ method: "GET", url: "/metrics", headers });
  if (response.statusCode !== 200) throw new Error(`GET /metrics answered ${response.statusCode}: ${response.body}`);
  return parseScrape(response.body);
}

/** How much each sample moved between two scrapes. */
function moved(before: Scrape, after: Scrape) {
  return (name: string, labels: Record<string, string> = {}) => after.value(name, labels) - before.value(name, labels);
}

async function gatewayHarness(t: Test, config: Record<string, unknown> = {}) {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    config: {
      apis: [{ id: API, name: "metrics", workspaceId: "ws_test" }],
      routes: [
        { name: "orders", match: { prefix: "/orders" }, upstream: upstream.url, apiId: API },
        { name: "down", match: { prefix: "/down" }, upstream: `http://127.0.0.1:${await freePort()}`, apiId: API },
      ],
      ...config,
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const get = async (path: string, key?: string) => {
    const response = await fetch(`${base}${path}`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
    await response.arrayBuffer();
    return response.status;
  };
  return { h, base, get };
}

t.test("/v2 traffic: requests, verifications, rate limit decisions and cache lookups move by what was asked", async (t) => {
  const h = await harness(t);
  const apiId = await createApi(h);
  const { key, keyId } = await createKey(h, apiId);
  const limited = await createKey(h, apiId, { ratelimits: [{ name: "requests", limit: 2, duration: 60_000, autoApply: true }] });
  const before = await scrape(h);

  for (let i = 0; i < 3; i++) t.equal((await h.call("keys.verifyKey", { key })).body.data.code, "VALID");
  t.equal((await h.call("keys.verifyKey", { key: "sk_nope" })).body.data.code, "NOT_FOUND");
  const limitedCodes = [];
  for (let i = 0; i < 3; i++) limitedCodes.push((await h.call("keys.verifyKey", { key: limited.key })).body.data.code);
  t.same(limitedCodes, ["VALID", "VALID", "RATE_LIMITED"]);
  const limits = [];
  for (let i = 0; i < 2; i++) {
    limits.push(
      (await h.call("ratelimit.limit", { namespace: "metered", identifier: "user_1", limit: 1, duration: 60_000 })).body.data.success,
    );
  }
  t.same(limits, [true, false]);
  t.equal((await h.call("keys.verifyKey", { key }, { rootKey: "not-a-root-key" })).status, 401);

  const after = await scrape(h);
  const delta = moved(before, after);
  t.equal(delta("keygate_http_requests_total", { face: "v2", route: "keys.verifyKey", status: "200" }), 7);
  t.equal(delta("keygate_http_requests_total", { face: "v2", route: "keys.verifyKey", status: "401" }), 1);
  t.equal(delta("keygate_http_requests_total", { face: "v2", route: "ratelimit.limit", status: "200" }), 2);
  t.equal(delta("keygate_http_request_duration_seconds_count", { face: "v2", route: "keys.verifyKey", status: "200" }), 7);
  t.equal(delta("keygate_verifications_total", { source: "api", outcome: "VALID" }), 5);
  t.equal(delta("keygate_verifications_total", { source: "api", outcome: "NOT_FOUND" }), 1);
  t.equal(delta("keygate_verifications_total", { source: "api", outcome: "RATE_LIMITED" }), 1);
  t.equal(delta("keygate_ratelimit_decisions_total", { source: "key", result: "allowed", decided: "memory" }), 2);
  t.equal(delta("keygate_ratelimit_decisions_total", { source: "key", result: "denied", decided: "memory" }), 1);
  t.equal(delta("keygate_ratelimit_decisions_total", { source: "ratelimit.limit", result: "allowed", decided: "memory" }), 1);
  t.equal(delta("keygate_ratelimit_decisions_total", { source: "ratelimit.limit", result: "denied", decided: "memory" }), 1);
  // Each of the three keys (the unknown one too) is loaded once, then found in the cache.
  t.equal(delta("keygate_cache_lookups_total", { cache: "keys", result: "miss" }), 3);
  t.equal(delta("keygate_cache_lookups_total", { cache: "keys", result: "hit" }), 4);
  t.ok(delta("keygate_cache_lookups_total", { cache: "namespaces", result: "miss" }) >= 1, "the new namespace was looked up");
  t.ok(after.value("process_cpu_seconds_total") > 0, "process metrics are there");
  t.ok(after.text.includes("keygate_analytics_events_recorded_total"), "the analytics pipeline's series are there");
  for (const secret of [key, keyId, limited.key, limited.keyId, "user_1"])
    t.notOk(after.text.includes(secret), "no key, key id or identifier in a label");
});

t.test("each cache's entries, bytes, share of cache.maxBytes and evictions are series of their own", async (t) => {
  const h = await harness(t, { config: { cache: { maxBytes: 4 * 1024 * 1024 } } });
  const apiId = await createApi(h);
  const { key } = await createKey(h, apiId);
  const rootKey = await h.rootKey(["api.*.verify_key"]);
  t.equal((await h.call("keys.verifyKey", { key }, { rootKey })).body.data.code, "VALID");
  t.equal((await h.call("keys.verifyKey", { key: "sk_unknown" }, { rootKey })).body.data.code, "NOT_FOUND");
  const scraped = await scrape(h);
  t.equal(scraped.value("keygate_cache_entries", { cache: "keys" }), 1, "the verified key");
  t.equal(scraped.value("keygate_cache_entries", { cache: "unknown_keys" }), 1, "the unknown key, apart");
  t.equal(scraped.value("keygate_cache_entries", { cache: "root_keys" }), 1, "the stored root key");
  t.ok(scraped.value("keygate_cache_bytes", { cache: "keys" }) > 100, "a view's estimated bytes");
  t.equal(scraped.value("keygate_cache_max_bytes", { cache: "keys" }), Math.floor(4 * 1024 * 1024 * 0.7), "its share of the budget");
  t.equal(scraped.value("keygate_cache_evictions_total", { cache: "keys" }), 0);
  for (const cache of ["namespaces", "namespace_names", "unknown_root_keys"])
    t.equal(scraped.value("keygate_cache_entries", { cache }), 0, `${cache} is there, empty`);
});

t.test("gateway traffic: per-route requests, verifications and upstream timings and errors", async (t) => {
  const { h, get } = await gatewayHarness(t);
  const { key } = await createKey(h, API);
  const before = await scrape(h);

  t.equal(await get("/orders/1", key), 200);
  t.equal(await get("/orders/2", key), 200);
  t.equal(await get("/orders/3"), 401, "no key");
  t.equal(await get("/down/1", key), 502);
  t.equal(await get("/nowhere"), 404);

  const delta = moved(before, await scrape(h));
  t.equal(delta("keygate_http_requests_total", { face: "gateway", route: "orders", status: "200" }), 2);
  t.equal(delta("keygate_http_requests_total", { face: "gateway", route: "orders", status: "401" }), 1);
  t.equal(delta("keygate_http_requests_total", { face: "gateway", route: "down", status: "502" }), 1);
  t.equal(delta("keygate_http_requests_total", { face: "gateway", route: "unmatched", status: "404" }), 1);
  t.equal(delta("keygate_verifications_total", { source: "gateway", outcome: "VALID" }), 3);
  t.equal(delta("keygate_upstream_duration_seconds_count", { route: "orders" }), 2);
  t.equal(delta("keygate_upstream_errors_total", { route: "down", kind: "unreachable" }), 1);
  t.equal(delta("keygate_upstream_duration_seconds_count", { route: "down" }), 0, "no answer, no timing");
});

t.test("metrics.token: a scrape needs the bearer token", async (t) => {
  const token = "metrics-token-0123456789";
  const h = await harness(t, { config: { metrics: { token } } });
  const missing = await h.app.inject({ method: "GET", url: "/metrics" });
  t.equal(missing.statusCode, 401);
  t.equal(missing.headers["www-authenticate"], 'Bearer realm="metrics"');
  t.equal(
    (await h.app.inject({ method: "GET", url: "/metrics", headers: { authorization: "Bearer wrong-token-0123456789" } })).statusCode,
    401,
  );
  const scraped = await scrape(h, { authorization: `Bearer ${token}` });
  t.ok(scraped.text.includes("keygate_http_requests_total"));
});

t.test("metrics.enabled: false serves no /metrics", async (t) => {
  const h = await harness(t, { config: { metrics: { enabled: false } } });
  t.equal((await h.app.inject({ method: "GET", url: "/metrics" })).statusCode, 404);
  t.equal((await h.call("keys.verifyKey", { key: "sk_nope" })).status, 200, "everything else works as before");
});

t.test("metrics.port: /metrics moves to its own listener, opened and closed with the app", async (t) => {
  const port = await freePort();
  const { h, get } = await gatewayHarness(t, { metrics: { port } });
  t.equal((await h.app.inject({ method: "GET", url: "/metrics" })).statusCode, 404, "not on the main port");
  t.equal(await get("/orders/1"), 401);
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  const scraped = parseScrape(await response.text());
  t.equal(response.status, 200);
  t.equal(scraped.value("keygate_http_requests_total", { face: "gateway", route: "orders", status: "401" }), 1);
  await h.app.close();
  await t.rejects(fetch(`http://127.0.0.1:${port}/metrics`), "closed with the app");
});

t.test("on Redis: decisions by Redis, then by this instance once a window is known to be exhausted", async (t) => {
  const h = await harness(t, { storage: "redis" });
  const before = await scrape(h);
  const answers = [];
  for (let i = 0; i < 4; i++) {
    answers.push(
      (await h.call("ratelimit.limit", { namespace: "redis-metered", identifier: "u", limit: 1, duration: 60_000 })).body.data.success,
    );
  }
  t.same(answers, [true, false, false, false]);
  const after = await scrape(h);
  const delta = moved(before, after);
  t.equal(delta("keygate_ratelimit_decisions_total", { source: "ratelimit.limit", result: "allowed", decided: "redis" }), 1);
  t.equal(
    delta("keygate_ratelimit_decisions_total", { source: "ratelimit.limit", result: "denied", decided: "redis" }) +
      delta("keygate_ratelimit_decisions_total", { source: "ratelimit.limit", result: "denied", decided: "local" }),
    3,
  );
  t.ok(
    delta("keygate_ratelimit_decisions_total", { source: "ratelimit.limit", result: "denied", decided: "local" }) >= 1,
    "denied locally",
  );
  t.ok(delta("keygate_redis_command_duration_seconds_count", { command: "ratelimit" }) >= 1, "the rate limit script is timed");
  t.equal(after.value("keygate_redis_breaker_open"), 0);
});
