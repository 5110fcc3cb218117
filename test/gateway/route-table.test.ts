import t from "tap";
import { ConfigError, validateConfig } from "../../src/config/load.js";
import { extractKey } from "../../src/gateway/key-extraction.js";
import type { RouteConfig } from "../../src/gateway/route-config.js";
import { RouteTable, RouteTableError } from "../../src/gateway/route-table.js";

const route = (name: string, prefix: string, extra: Partial<RouteConfig> = {}): RouteConfig =>
  ({ name, match: { prefix }, upstream: "http://127.0.0.1:9001", apiId: "api_orders", ...extra }) as RouteConfig;

function problems(configs: RouteConfig[]): readonly string[] {
  try {
    RouteTable.compile(configs);
  } catch (error) {
    if (error instanceof RouteTableError) return error.problems;
    throw error;
  }
  return [];
}

t.test("escaped letters, digits and '-._~' match as themselves; other escapes, and letter case, do not", async (t) => {
  const table = RouteTable.compile([route("all", "/"), route("orders", "/orders"), route("tilde", "/%7Euser")]);
  t.equal(table.match("GET", "/%6Frders/1")?.name, "orders");
  t.equal(table.match("GET", "/%6frders")?.name, "orders", "hex digits in either case");
  t.equal(table.match("GET", "/~user/x")?.name, "tilde", "a prefix written with escapes matches the unescaped path");
  t.equal(table.match("GET", "/orders%2F1")?.name, "all", "an escaped slash is not a segment boundary");
  t.equal(table.match("GET", "/Orders")?.name, "all", "paths are case-sensitive");
  t.same(table.methodsFor("/%6Frders"), [], "methodsFor sees the same path");
});

t.test("the longest prefix wins, on path segment boundaries", async (t) => {
  const table = RouteTable.compile([route("all", "/"), route("orders", "/orders"), route("items", "/orders/items/")]);
  t.equal(table.match("GET", "/orders")?.name, "orders");
  t.equal(table.match("GET", "/orders/")?.name, "orders");
  t.equal(table.match("GET", "/orders/42")?.name, "orders");
  t.equal(table.match("GET", "/orders/items")?.name, "items", "a trailing slash in the prefix does not matter");
  t.equal(table.match("GET", "/orders/items/7")?.name, "items");
  t.equal(table.match("GET", "/orders-old")?.name, "all", "not a prefix match inside a segment");
  t.equal(table.match("GET", "/")?.name, "all");
  t.equal(RouteTable.compile([route("orders", "/orders")]).match("GET", "/other"), undefined);
});

t.test("methods restrict a route; routes of one prefix may split the methods", async (t) => {
  const table = RouteTable.compile([
    route("read", "/orders", { match: { prefix: "/orders", methods: ["GET", "HEAD"] } }),
    route("write", "/orders", { match: { prefix: "/orders", methods: ["POST"] } }),
  ]);
  t.equal(table.match("GET", "/orders")?.name, "read");
  t.equal(table.match("POST", "/orders/1")?.name, "write");
  t.equal(table.match("DELETE", "/orders"), undefined);
});

t.test("problems the schema cannot see are reported with their path", async (t) => {
  t.same(problems([route("a", "/v2"), route("b", "/v2/keys")]), [
    "routes[0].match.prefix: '/v2' is reserved for the management API (/v2)",
    "routes[1].match.prefix: '/v2/keys' is reserved for the management API (/v2)",
  ]);
  t.same(problems([route("a", "/x"), route("a", "/y")]), ["routes[1].name: 'a' is also the name of routes[0]"]);
  t.same(problems([route("a", "/x"), route("b", "/x/")]), [
    "routes[1].match: same prefix '/x/' and methods as routes[0]; give them different methods",
  ]);
  t.same(problems([route("a", "/x", { permissions: "a AND" })]), [
    "routes[0].permissions: expected a permission or '(' at position 6, found the end of the query",
  ]);
  t.same(problems([route("a", "/x", { key: { header: "x-api-key", query: "api_key" } })]), [
    "routes[0].key: give exactly one of 'header' or 'query'",
  ]);
  t.same(problems([route("a", "/x", { key: { query: "k", scheme: "Bearer" } })]), ["routes[0].key.scheme: only applies to a header"]);
  t.same(problems([route("a", "/x", { upstream: "http://h/?a=1" })]), ["routes[0].upstream: must not have a query string or fragment"]);
  t.same(problems([route("a", "/x", { forward: { keyId: "x-id", identity: "X-Id" } })]), [
    "routes[0].forward: two values share a header name",
  ]);
  t.same(
    problems([
      route("a", "/x", {
        ratelimits: [
          { name: "req", cost: 1 },
          { name: "req", cost: 2 },
        ],
      }),
    ]),
    ["routes[0].ratelimits[1].name: 'req' is listed twice"],
  );
});

t.test("an invalid route stops the configuration with path-qualified messages", async (t) => {
  try {
    validateConfig({
      routes: [
        {
          name: "a",
          match: { prefix: "orders", methods: ["FETCH"] },
          upstream: "ftp://x",
          apiId: "api_orders",
          namespaceLimits: [{ namespace: "n", identifier: "cookie", limit: 0, duration: 10 }],
        },
      ],
    });
    t.fail("expected a ConfigError");
  } catch (error) {
    t.ok(error instanceof ConfigError);
    t.same([...(error as ConfigError).problems].sort(), [
      'routes[0].match.methods[0]: must be one of: "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"',
      "routes[0].match.prefix: must start with /",
      "routes[0].namespaceLimits[0].duration: must be greater than or equal to 1000",
      "routes[0].namespaceLimits[0].identifier: must be key, identity, ip or header:<header name>",
      "routes[0].namespaceLimits[0].limit: must be greater than or equal to 1",
      "routes[0].upstream: must be an http:// or https:// URL with a host",
    ]);
  }
});

t.test("keys come from a header after its scheme, a whole header, or a query parameter", async (t) => {
  const query = "api_key=sk_query&other=1";
  const bearer = { kind: "header" as const, header: "authorization", scheme: "Bearer" };
  t.equal(extractKey([bearer], { authorization: "Bearer sk_123" }, query), "sk_123");
  t.equal(extractKey([bearer], { authorization: "bearer   sk_123  " }, query), "sk_123", "scheme ignoring case, spaces trimmed");
  t.equal(extractKey([bearer], { authorization: "Basic abc" }, query), undefined);
  t.equal(extractKey([bearer], { authorization: "Bearer" }, query), undefined);
  t.equal(extractKey([bearer], {}, query), undefined);
  t.equal(extractKey([{ kind: "header", header: "x-api-key" }], { "x-api-key": " sk_header " }, query), "sk_header");
  t.equal(extractKey([{ kind: "header", header: "x-api-key" }], { "x-api-key": "" }, query), undefined);
  t.equal(extractKey([{ kind: "query", parameter: "api_key" }], {}, query), "sk_query");
  t.equal(extractKey([{ kind: "query", parameter: "missing" }], {}, query), undefined);
  t.equal(extractKey([{ kind: "query", parameter: "api_key" }], {}, ""), undefined, "no query at all");
  t.equal(extractKey([{ kind: "query", parameter: "api_key" }], {}, "api_key=sk%2Fx%20y"), "sk/x y", "decoded");
});
