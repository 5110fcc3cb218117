import t from "tap";
import { pathRefusal, upstreamHeaders, upstreamPath, upstreamUrl } from "../../src/gateway/forwarding.js";
import { endToEndHeaders, endToEndResponseLines } from "../../src/gateway/hop-by-hop.js";
import { ratelimitHeaders } from "../../src/gateway/ratelimit-headers.js";
import type { RouteConfig } from "../../src/gateway/route-config.js";
import { RouteTable } from "../../src/gateway/route-table.js";
import { splitTarget } from "../../src/http/request-target.js";

const compile = (extra: Partial<RouteConfig>) =>
  RouteTable.compile([
    { name: "r", match: { prefix: "/orders" }, upstream: "http://127.0.0.1:9001", apiId: "api_orders", ...extra } as RouteConfig,
  ]).routes[0]!;

t.test("the upstream URL keeps the path and query, minus a key given as a query parameter", async (t) => {
  t.equal(upstreamUrl(compile({}), splitTarget("/orders/1?x=1&y=2")), "http://127.0.0.1:9001/orders/1?x=1&y=2");
  t.equal(upstreamUrl(compile({ upstream: "http://h:1/base/" }), splitTarget("/orders")), "http://h:1/base/orders");
  const byQuery = compile({ key: { query: "api_key" } });
  t.equal(upstreamUrl(byQuery, splitTarget("/orders?api_key=sk_1&page=2")), "http://127.0.0.1:9001/orders?page=2");
  t.equal(upstreamUrl(byQuery, splitTarget("/orders?api_key=sk_1")), "http://127.0.0.1:9001/orders");
});

t.test("the upstream path holds the route's base path, the request path and the query, as given", async (t) => {
  t.equal(
    upstreamPath(compile({ upstream: "http://h:1/base" }), splitTarget("/orders/1?next=../x&y=%zz")),
    "/base/orders/1?next=../x&y=%zz",
  );
  t.equal(upstreamPath(compile({ key: { query: "api_key" } }), splitTarget("/orders?api_key=sk_1")), "/orders");
});

t.test("paths with dot segments, in any spelling, or that do not decode are refused; dots within a segment are not", async (t) => {
  const refused = [
    "/a/..",
    "/a/../b",
    "/a/./b",
    "/.",
    "/a/%2e%2E/b",
    "/a/%2E",
    "/a/.%2e",
    "/a/..%2fb",
    "/a%2f..%2fb",
    "/a\\..\\b",
    "/a/..%5Cb",
    "/a/..;/b",
    "/a/...",
    "/a/..b",
    "/a/b../c",
    "/a/b..",
    "/a/%zz",
    "/a/%C0%AF",
    "/a/%E0%A4%A",
  ];
  for (const path of refused) t.ok(pathRefusal(path), `${path} is refused`);
  const allowed = ["/", "/orders/7", "/a/b.c", "/a/v1..2", "/a/.well-known/x", "/a/%2F", "/a%2Fb", "/a/%5C", "/a/%C3%A9"];
  for (const path of allowed) t.equal(pathRefusal(path), undefined, `${path} is forwarded`);
});

t.test("upstream headers drop the key and forged identity headers, and add the real ones", async (t) => {
  const route = compile({ forward: { keyId: "X-Keygate-Key-Id", identity: "x-keygate-identity", externalId: "x-keygate-external-id" } });
  const headers = upstreamHeaders(
    route,
    {
      authorization: "Bearer sk_secret",
      "x-keygate-key-id": "key_forged",
      "x-keygate-identity": "id_forged",
      "x-keygate-external-id": "forged",
      accept: "application/json",
      "x-forwarded-for": "10.0.0.1",
      via: "1.1 edge",
    },
    { key: { keyId: "key_real", identity: { id: "id_real", externalId: "customer_7" }, shown: { keyId: "key_real", enabled: true } } },
    { peer: "192.0.2.7", protocol: "https", host: "api.example.com", via: "1.1 keygate-test" },
  );
  t.equal(headers.authorization, undefined, "the key does not reach the upstream");
  t.equal(headers["x-keygate-key-id"], "key_real");
  t.equal(headers["x-keygate-identity"], "id_real");
  t.equal(headers["x-keygate-external-id"], "customer_7");
  const withoutIdentity = upstreamHeaders(
    route,
    { "x-keygate-identity": "id_forged", "x-keygate-external-id": "forged" },
    { key: { keyId: "key_real", shown: { keyId: "key_real", enabled: true } } },
    { peer: "192.0.2.7", protocol: "https", host: "api.example.com", via: "1.1 keygate-test" },
  );
  t.equal(withoutIdentity["x-keygate-identity"], undefined, "a forged header is dropped even when there is no real value");
  t.equal(withoutIdentity["x-keygate-external-id"], undefined, "a forged header is dropped even when there is no real value");
  t.equal(headers.accept, "application/json");
  t.equal(headers["x-forwarded-for"], "10.0.0.1, 192.0.2.7");
  t.equal(headers["x-forwarded-proto"], "https");
  t.equal(headers["x-forwarded-host"], "api.example.com");
  t.equal(headers.via, "1.1 edge, 1.1 keygate-test", "keygate's entry is appended to the Via of the hops before it");
  t.equal(withoutIdentity.via, "1.1 keygate-test");
  t.equal(headers.host, "127.0.0.1:9001", "the upstream is addressed by its own name");
});

t.test("hop-by-hop headers: Connection and every name it lists (any line, any case), and the fixed set", async (t) => {
  const request = endToEndHeaders(
    {
      connection: ["keep-alive, X-A", " x-b ,,X-C"],
      "x-a": "1",
      "x-b": "2",
      "x-c": "3",
      "x-d": "4",
      "keep-alive": "timeout=1",
      te: "gzip, trailers;q=0.5",
      expect: "100-continue",
      upgrade: "h2c",
    },
    "request",
  );
  t.same(request, { "x-d": "4", te: "trailers" }, "a request keeps TE only as 'trailers', and drops Expect (met here)");
  t.same(endToEndHeaders({ te: "gzip" }, "request"), {}, "TE without trailers is dropped");
  t.same(endToEndHeaders({ te: "trailers", expect: "100-continue", "proxy-authenticate": "Basic", "x-e": "5" }, "response"), {
    expect: "100-continue",
    "x-e": "5",
  });
  t.same(
    endToEndResponseLines(
      ["Connection", "Upgrade, X-A", "Upgrade", "websocket", "X-A", "1", "Sec-WebSocket-Accept", "abc", "Keep-Alive", "timeout=5"],
      { upgrade: true },
    ),
    [
      ["Sec-WebSocket-Accept", "abc"],
      ["Connection", "Upgrade"],
      ["Upgrade", "websocket"],
    ],
    "a 101 keeps its Upgrade, with Connection: Upgrade only",
  );
  t.same(endToEndResponseLines(["Upgrade", "websocket", "Transfer-Encoding", "chunked", "X-B", "2"]), [["X-B", "2"]]);
});

t.test("rate limit headers name every applied limit, or only the one that denied", async (t) => {
  const now = 1_000_000;
  const requests = {
    name: "requests",
    check: { bucket: "key:k:requests", limit: 100, durationMs: 60_000, cost: 1 },
    remaining: 40,
    resetAt: now + 30_500,
    passed: true,
  };
  const burst = {
    name: "burst",
    check: { bucket: "key:k:burst", limit: 10, durationMs: 1_000, cost: 1 },
    remaining: 1,
    resetAt: now + 400,
    passed: true,
  };
  t.same(ratelimitHeaders([requests, burst], now), {
    "ratelimit-policy": '"requests";q=100;w=60, "burst";q=10;w=1',
    ratelimit: '"requests";r=40;t=31, "burst";r=1;t=1',
    "x-ratelimit-limit": "10",
    "x-ratelimit-remaining": "1",
    "x-ratelimit-reset": String(Math.ceil((now + 400) / 1000)),
  });
  const denied = { ...burst, remaining: 0, passed: false };
  t.same(ratelimitHeaders([requests, denied], now), {
    "ratelimit-policy": '"burst";q=10;w=1',
    ratelimit: '"burst";r=0;t=1',
    "x-ratelimit-limit": "10",
    "x-ratelimit-remaining": "0",
    "x-ratelimit-reset": String(Math.ceil((now + 400) / 1000)),
    "retry-after": "1",
  });
  t.same(ratelimitHeaders([], now), {});
  t.match(ratelimitHeaders([{ ...requests, name: 'a"b' }], now)["ratelimit-policy"], /^"a\\"b";/, "names are quoted structured strings");
});
