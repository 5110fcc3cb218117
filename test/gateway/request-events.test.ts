import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import WebSocket from "ws";
import type { GatewayRequestEvent } from "../../src/domain/analytics/events.js";
import { redactedQuery } from "../../src/gateway/request-events.js";
import { recordingAnalytics } from "../helpers/analytics.js";
import { LONGEST_WINDOW_MS, ManualClock } from "../helpers/clock.js";
import { createKey } from "../helpers/fixtures.js";
import { harness, STORAGE_KINDS, WORKSPACE } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

const API = "api_gateway_events";
/** An API whose workspace no request has looked up before the test of a missing key. */
const QUIET_API = "api_gateway_events_quiet";
const QUIET_WORKSPACE = "ws_quiet";

/**
 * An upstream that answers every request with a cookie, except those under /held: they wait for `release`
 * (which the test's end calls too).
 */
async function startCookieUpstream(t: Test): Promise<{ url: string; held: () => number; release: () => void }> {
  const held: ServerResponse[] = [];
  const server = createServer((request, response) => {
    request.resume();
    if (request.url?.startsWith("/held")) return void held.push(response);
    response.writeHead(200, { "set-cookie": ["session=upstream-secret; HttpOnly"], "x-upstream": "yes" }).end("{}");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const release = () => {
    for (const response of held.splice(0)) response.end("late");
  };
  t.teardown(() => {
    release();
    return new Promise((resolve) => server.close(resolve));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, held: () => held.length, release };
}

t.test("the key's query parameter is redacted however it is written; the rest stays as sent", async (t) => {
  const source = { kind: "query", parameter: "api_key" } as const;
  t.equal(redactedQuery("api_key=sk_1&x=%41+b", [source]), "api_key=REDACTED&x=%41+b");
  t.equal(redactedQuery("x=1&api_key=sk_1&api_key=sk_2", [source]), "x=1&api_key=REDACTED&api_key=REDACTED", "every occurrence");
  t.equal(redactedQuery("api%5fkey=sk_1&api_key", [source]), "api%5fkey=REDACTED&api_key", "an escaped name; a name alone has no value");
  t.equal(redactedQuery("api+key=sk_1", [{ kind: "query", parameter: "api key" }]), "api+key=REDACTED", "+ is a space in a name");
  t.equal(redactedQuery("api_keys=not-the-key&", [source]), "api_keys=not-the-key&", "other names, and empty pairs, as they are");
  t.equal(redactedQuery("api_key=sk_1", [{ kind: "header", header: "authorization" }]), "api_key=sk_1", "a header route reads no query");
});

for (const storage of STORAGE_KINDS) {
  t.test(`every request the gateway answers is one analytics event, on ${storage} stores`, async (t) => {
    const events: GatewayRequestEvent[] = [];
    const clock = new ManualClock();
    const upstream = await startUpstream(t);
    const cookies = await startCookieUpstream(t);
    const h = await harness(t, {
      storage,
      clock,
      analytics: recordingAnalytics({ gatewayRequests: events }),
      config: {
        apis: [
          { id: API, name: "events", workspaceId: WORKSPACE },
          { id: QUIET_API, name: "quiet", workspaceId: QUIET_WORKSPACE },
        ],
        routes: [
          { name: "orders", match: { prefix: "/orders" }, upstream: upstream.url, apiId: API },
          { name: "quiet", match: { prefix: "/quiet" }, upstream: upstream.url, apiId: QUIET_API },
          { name: "by-query", match: { prefix: "/query-key" }, upstream: upstream.url, apiId: API, key: { query: "api_key" } },
          { name: "down", match: { prefix: "/down" }, upstream: "http://127.0.0.1:9", apiId: API },
          { name: "slow", match: { prefix: "/slow" }, upstream: upstream.url, apiId: API, timeoutMs: 300 },
          { name: "held", match: { prefix: "/held" }, upstream: cookies.url, apiId: API },
          {
            name: "recorded-headers",
            match: { prefix: "/headers" },
            upstream: cookies.url,
            apiId: API,
            key: { header: "x-api-key" },
            analytics: { headers: true },
          },
        ],
        gateway: { trustProxy: ["loopback"] },
      },
    });
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const port = (h.app.server.address() as AddressInfo).port;
    const base = `http://127.0.0.1:${port}`;
    const { key, keyId } = await createKey(h, API);

    const send = async (path: string, headers: Record<string, string> = {}) => {
      const response = await fetch(`${base}${path}`, { headers });
      await response.arrayBuffer();
      return response;
    };
    /** The events recorded from `from` on, once there are `count` of them. */
    const recorded = (from: number, count: number) =>
      waitFor(`${count} events are recorded`, 5_000, (because) => {
        because(`${events.length - from} so far`);
        return events.length - from >= count ? events.slice(from) : undefined;
      });
    /** Sends one request and returns its event (and that it is the only one). */
    const eventOf = async (t: Test, path: string, headers: Record<string, string> = {}) => {
      const from = events.length;
      const response = await send(path, headers);
      const [event] = await recorded(from, 1);
      t.equal(event?.requestId, response.headers.get("x-request-id"), "the request's own id");
      return { response, event: event as GatewayRequestEvent };
    };

    await t.test("a forwarded request: its route, API, key, outcome and where its time went", async (t) => {
      const { response, event } = await eventOf(t, "/orders/42?page=2&sort=desc", {
        authorization: `Bearer ${key}`,
        "user-agent": "events-test/1.0",
      });
      t.equal(response.status, 200);
      t.match(event, {
        time: clock.now(),
        workspaceId: WORKSPACE,
        apiId: API,
        route: "orders",
        method: "GET",
        host: `127.0.0.1:${port}`,
        path: "/orders/42",
        queryString: "page=2&sort=desc",
        responseStatus: 200,
        userAgent: "events-test/1.0",
        ipAddress: "127.0.0.1",
        keyId,
        outcome: "VALID",
        requestHeaders: [],
        responseHeaders: [],
        requestBody: "",
        responseBody: "",
      });
      t.ok(event.upstreamLatencyMs > 0, "the upstream took some time");
      t.ok(event.totalLatencyMs >= event.upstreamLatencyMs);
      t.equal(event.gatewayLatencyMs + event.upstreamLatencyMs, event.totalLatencyMs, "gateway and upstream make the total");
      t.ok(event.gatewayLatencyMs >= 0);
    });

    await t.test("N requests are exactly N events, one per request id", async (t) => {
      const from = events.length;
      const paths = ["/orders/a", "/orders/b", "/quiet/c", "/down/d", "/query-key/e", "/orders/f"];
      const ids = [];
      for (const path of paths) ids.push((await send(path, { authorization: `Bearer ${key}` })).headers.get("x-request-id"));
      const seen = await recorded(from, paths.length);
      // Give a second event for any of them the time to show up: the next request's event comes after it.
      await eventOf(t, "/orders/last");
      t.same(
        events
          .slice(from, from + paths.length)
          .map((event) => event.requestId)
          .sort(),
        ids.sort(),
      );
      t.equal(events.length - from, paths.length + 1, "no request was recorded twice");
      t.same(
        seen.map((event) => event.path),
        paths,
      );
    });

    await t.test("a request without a key: refused before any verification", async (t) => {
      const { response, event } = await eventOf(t, "/quiet/x");
      t.equal(response.status, 401);
      t.match(event, { responseStatus: 401, keyId: "", outcome: "", upstreamLatencyMs: 0, route: "quiet", apiId: QUIET_API });
      t.equal(event.workspaceId, QUIET_WORKSPACE, "the route's workspace, though no key made the gateway look it up");
      t.equal(event.gatewayLatencyMs, event.totalLatencyMs);
    });

    await t.test("an unknown key is NOT_FOUND, with no key id", async (t) => {
      const { response, event } = await eventOf(t, "/orders/x", { authorization: "Bearer sk_not_a_key" });
      t.equal(response.status, 401);
      t.match(event, { responseStatus: 401, keyId: "", outcome: "NOT_FOUND", workspaceId: WORKSPACE, upstreamLatencyMs: 0 });
      t.notOk(JSON.stringify(event).includes("sk_not_a_key"), "the key presented is nowhere in the event");
    });

    await t.test("a rate limited request is a 429 with the outcome RATE_LIMITED", async (t) => {
      const limited = await createKey(h, API, {
        ratelimits: [{ name: "requests", limit: 1, duration: LONGEST_WINDOW_MS, autoApply: true }],
      });
      const first = await eventOf(t, "/orders/x", { authorization: `Bearer ${limited.key}` });
      t.match(first.event, { responseStatus: 200, outcome: "VALID", keyId: limited.keyId });
      const { response, event } = await eventOf(t, "/orders/x", { authorization: `Bearer ${limited.key}` });
      t.equal(response.status, 429);
      t.match(event, { responseStatus: 429, outcome: "RATE_LIMITED", keyId: limited.keyId, upstreamLatencyMs: 0 });
    });

    await t.test("an upstream that cannot be reached: 502, after the request was sent", async (t) => {
      const { response, event } = await eventOf(t, "/down/x", { authorization: `Bearer ${key}` });
      t.equal(response.status, 502);
      t.match(event, { responseStatus: 502, outcome: "VALID", keyId, route: "down" });
      t.ok(event.upstreamLatencyMs > 0, "until the upstream failed");
      t.equal(event.gatewayLatencyMs + event.upstreamLatencyMs, event.totalLatencyMs);
    });

    await t.test("an upstream that does not answer in time: 504, its wait counted upstream", async (t) => {
      const { response, event } = await eventOf(t, "/slow/slow/5000", { authorization: `Bearer ${key}` });
      t.equal(response.status, 504);
      t.match(event, { responseStatus: 504, outcome: "VALID", route: "slow" });
      t.ok(event.upstreamLatencyMs >= 300, "the route's timeout passed upstream");
    });

    await t.test("a client that goes away before its answer is recorded once, as 499", async (t) => {
      const from = events.length;
      const abandon = new AbortController();
      const request = fetch(`${base}/held/x`, { headers: { authorization: `Bearer ${key}` }, signal: abandon.signal });
      await waitFor("the upstream has the request", 5_000, () => (cookies.held() === 1 ? true : undefined));
      abandon.abort();
      await t.rejects(request);
      const [event] = await recorded(from, 1);
      cookies.release();
      t.match(event, { path: "/held/x", responseStatus: 499, outcome: "VALID", keyId });
      t.ok((event?.upstreamLatencyMs ?? 0) > 0, "the upstream had it until the client left");
      await eventOf(t, "/orders/after-abandon");
      t.equal(events.length - from, 2, "once");
    });

    await t.test("a key in the query string is never recorded", async (t) => {
      const { response, event } = await eventOf(t, `/query-key/x?a=1&api_key=${key}&b=${encodeURIComponent("two words")}`);
      t.equal(response.status, 200);
      t.equal(event.queryString, "a=1&api_key=REDACTED&b=two%20words");
      t.equal(event.outcome, "VALID");
      const escaped = await eventOf(t, `/query-key/x?api%5Fkey=${key}`);
      t.equal(escaped.response.status, 200, "an escaped parameter name is the key's parameter too");
      t.equal(escaped.event.queryString, "api%5Fkey=REDACTED");
      for (const each of [event, escaped.event]) t.notOk(JSON.stringify(each).includes(key), "the key is nowhere in the event");
    });

    await t.test("headers are recorded only where the route asks, secrets redacted", async (t) => {
      const { event } = await eventOf(t, "/headers/x?q=1", {
        "x-api-key": key,
        cookie: "session=client-secret",
        "proxy-authorization": "Basic c2VjcmV0",
        "x-tenant": "acme",
      });
      t.equal(event.responseStatus, 200);
      t.ok(event.requestHeaders.includes("x-api-key: REDACTED"), "the route's key header");
      t.ok(event.requestHeaders.includes("cookie: REDACTED"));
      t.ok(event.requestHeaders.includes("proxy-authorization: REDACTED"));
      t.ok(event.requestHeaders.includes("x-tenant: acme"), "other headers as received");
      t.ok(event.responseHeaders.includes("set-cookie: REDACTED"), "the upstream's cookie");
      t.ok(event.responseHeaders.includes("x-upstream: yes"));
      t.ok(event.responseHeaders.includes(`x-request-id: ${event.requestId}`), "the answer as sent to the client");
      const text = JSON.stringify(event);
      for (const secret of [key, "client-secret", "c2VjcmV0", "upstream-secret"]) t.notOk(text.includes(secret), `no ${secret}`);

      const refused = await eventOf(t, "/headers/x", { "x-api-key": "sk_unknown" });
      t.equal(refused.event.responseStatus, 401);
      t.ok(refused.event.responseHeaders.includes("content-type: application/json; charset=utf-8"), "refusals' headers too");
      t.notOk(JSON.stringify(refused.event).includes("sk_unknown"));

      const plain = await eventOf(t, "/orders/x", { authorization: `Bearer ${key}`, "x-tenant": "acme" });
      t.same([plain.event.requestHeaders, plain.event.responseHeaders], [[], []], "off unless the route opts in");
      t.same([event.requestBody, event.responseBody], ["", ""], "`analytics.headers` records headers, not bodies");
    });

    await t.test("the client is the address the trusted proxies report", async (t) => {
      const behind = await eventOf(t, "/orders/x", { authorization: `Bearer ${key}`, "x-forwarded-for": "198.51.100.4, 203.0.113.7" });
      t.equal(behind.event.ipAddress, "203.0.113.7", "the proxy at 127.0.0.1 is trusted; the hop it reports is the client");
    });

    await t.test("/v2 calls and paths no route takes are not gateway requests", async (t) => {
      const from = events.length;
      t.equal((await h.call("apis.getApi", { apiId: API })).status, 200);
      const unauthenticated = await fetch(`${base}/v2/apis.getApi`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ apiId: API }),
      });
      t.equal(unauthenticated.status, 401, "over the same port as the gateway");
      t.equal((await send("/nowhere/at/all", { authorization: `Bearer ${key}` })).status, 404);
      await eventOf(t, "/orders/after");
      t.equal(events.length - from, 1, "only the gateway request that followed");
    });

    await t.test("a WebSocket upgrade is one event: 101 once switched, or its refusal", async (t) => {
      const from = events.length;
      const socket = new WebSocket(`ws://127.0.0.1:${port}/orders/live?x=1`, { headers: { authorization: `Bearer ${key}` } });
      await new Promise((resolve, reject) => {
        socket.once("open", resolve);
        socket.once("error", reject);
      });
      const [switched] = await recorded(from, 1);
      t.match(switched, {
        route: "orders",
        path: "/orders/live",
        queryString: "x=1",
        responseStatus: 101,
        outcome: "VALID",
        keyId,
        workspaceId: WORKSPACE,
      });
      t.ok((switched?.upstreamLatencyMs ?? 0) > 0);
      socket.close();
      await new Promise((resolve) => socket.once("close", resolve));

      const refused = new WebSocket(`ws://127.0.0.1:${port}/orders/live`);
      const status = await new Promise<number>((resolve) => {
        refused.once("unexpected-response", (_request, response) => {
          response.resume();
          resolve(response.statusCode ?? 0);
        });
        refused.once("error", () => resolve(0));
      });
      t.equal(status, 401);
      const unmatched = new WebSocket(`ws://127.0.0.1:${port}/nowhere`);
      await new Promise((resolve) => unmatched.once("error", resolve));
      await eventOf(t, "/orders/after-sockets");
      const upgrades = events.slice(from, -1);
      t.same(
        upgrades.map((event) => [event.path, event.responseStatus, event.outcome]),
        [
          ["/orders/live", 101, "VALID"],
          ["/orders/live", 401, ""],
        ],
        "one event each for the upgrades a route took, none for the path no route takes",
      );
    });
  });
}
