import t from "tap";
import { compileStringMatch, type MatchedRequest } from "../../../src/domain/routes/match-expressions.js";
import { compilePathRewrite, rewritePath } from "../../../src/domain/routes/path-rewrite.js";
import { compilePolicies } from "../../../src/domain/routes/policy-compiler.js";
import type { Problems } from "../../../src/domain/routes/problems.js";
import type { PolicyRecord } from "../../../src/storage/route-records.js";

const request = (
  parts: Partial<{ method: string; path: string; headers: Record<string, string>; query: Record<string, string> }>,
): MatchedRequest => ({
  method: parts.method ?? "GET",
  path: parts.path ?? "/",
  header: (name) => parts.headers?.[name],
  queryParam: (name) => parts.query?.[name],
});

function compiled(policies: PolicyRecord[]) {
  const problems: Problems = [];
  const result = compilePolicies(policies, "orders", "policies", problems);
  return { result, problems };
}

const policy = (fields: Partial<PolicyRecord>): PolicyRecord => ({ id: "pol_1", name: "p", enabled: true, ...fields });

t.test("string matches: exact, prefix and RE2 regex, any of them ignoring case", async (t) => {
  const match = (spec: Parameters<typeof compileStringMatch>[0]) => {
    const problems: Problems = [];
    const test = compileStringMatch(spec, "m", problems);
    t.same(problems, []);
    return test as (input: string) => boolean;
  };
  t.same(["/a", "/A", "/ab"].map(match({ exact: "/a" })), [true, false, false]);
  t.same(["/a", "/A", "/ab"].map(match({ exact: "/a", ignoreCase: true })), [true, true, false]);
  t.same(["/api/x", "/API/x", "/ap"].map(match({ prefix: "/api/" })), [true, false, false]);
  t.same(["/api/x", "/API/x"].map(match({ prefix: "/api/", ignoreCase: true })), [true, true]);
  t.same(
    ["/v1/users/42", "/v1/users/x", "/x/v1/users/7"].map(match({ regex: "/users/[0-9]+$" })),
    [true, false, true],
    "anywhere in the input",
  );
  t.same(["/V1/USERS/42"].map(match({ regex: "^/v1/users/\\d+$", ignoreCase: true })), [true]);
  // Backtracking engines take exponential time on this pattern; RE2 answers at once, and correctly.
  t.equal(match({ regex: "^(a+)+$" })(`${"a".repeat(5_000)}!`), false, "no catastrophic backtracking");
});

t.test("a string match sets exactly one mode, and a regex must compile", async (t) => {
  const problems: Problems = [];
  t.equal(compileStringMatch({ exact: "a", prefix: "b" }, "m", problems), undefined);
  t.equal(compileStringMatch({}, "n", problems), undefined);
  t.equal(compileStringMatch({ regex: "a(" }, "r", problems), undefined);
  t.equal(compileStringMatch({ regex: "(?<=a)b" }, "s", problems), undefined, "lookbehind is not RE2");
  t.match(problems, [
    { at: "m", message: "must set exactly one of exact, prefix or regex" },
    { at: "n", message: "must set exactly one of exact, prefix or regex" },
    { at: "r.regex", message: /not a valid RE2 regular expression/ },
    { at: "s.regex", message: /not a valid RE2 regular expression/ },
  ]);
});

t.test("match expressions: all must hold; headers and query parameters present or matching", async (t) => {
  const { result, problems } = compiled([
    policy({
      match: [
        { method: { methods: ["POST"] } },
        { header: { name: "X-Tenant", value: { prefix: "acme" } } },
        { queryParam: { name: "dry", present: true } },
      ],
      firewall: { action: "ACTION_DENY" },
    }),
  ]);
  t.same(problems, []);
  const holds = (parts: Parameters<typeof request>[0]) => result[0]?.matches.every((predicate) => predicate(request(parts)));
  t.equal(holds({ method: "POST", headers: { "x-tenant": "acme-1" }, query: { dry: "" } }), true, "header names compare lower-cased");
  t.equal(holds({ method: "GET", headers: { "x-tenant": "acme-1" }, query: { dry: "" } }), false);
  t.equal(holds({ method: "POST", headers: { "x-tenant": "other" }, query: { dry: "" } }), false);
  t.equal(holds({ method: "POST", headers: { "x-tenant": "acme-1" } }), false, "an absent parameter is not present");
  t.equal(holds({ method: "POST", query: { dry: "1" } }), false, "an absent header matches no value");
});

t.test("each problem is named by its field; disabled policies are checked but not compiled in", async (t) => {
  const { result, problems } = compiled([
    policy({ name: "a", enabled: false, firewall: { action: "ACTION_DENY" } }),
    policy({ name: "b", match: [{ path: { path: { exact: "/x" } }, method: { methods: ["GET"] } }], firewall: { action: "ACTION_DENY" } }),
    policy({ name: "c", firewall: { action: "ACTION_DENY" }, openapi: {} }),
    policy({ name: "d", keyauth: { keyspaces: [], locations: [{ bearer: {}, queryParam: { name: "k" } }], permissionQuery: "a AND" } }),
    policy({ name: "e", ratelimit: { limit: 1, windowMs: 1_000, identifiers: [{}, { remoteIp: {} }] } }),
    policy({ name: "f", firewall: { action: "ACTION_DENY", ipAllow: ["10.0.0.0/33"] } }),
    policy({ name: "f" }),
  ]);
  t.same(result.length, 0, "none compiled: the disabled one by being off, the others by their problems");
  t.same(
    problems.map((problem) => problem.at),
    [
      "policies[1].match[0]",
      "policies[2]",
      "policies[3].keyauth.keyspaces",
      "policies[3].keyauth.locations[0]",
      "policies[3].keyauth.permissionQuery",
      "policies[4].ratelimit.identifiers[0]",
      "policies[5].firewall.ipAllow[0]",
      "policies[6].name",
      "policies[6]",
    ],
  );
  const rule = problems.find((problem) => problem.at === "policies[2]");
  t.equal(rule?.message, "must set exactly one of keyauth, ratelimit, firewall, openapi, logging, cors");
});

t.test("rate limit policies count in the route's own namespace unless they name one", async (t) => {
  const { result } = compiled([
    policy({ name: "per ip", ratelimit: { limit: 5, windowMs: 60_000, identifiers: [{ remoteIp: {} }] } }),
    policy({
      name: "shared",
      ratelimit: {
        limit: 5,
        windowMs: 60_000,
        namespace: "api",
        cost: 2,
        identifiers: [{ principalField: { path: "meta.plan" } }, { principalField: { path: "keyId" } }],
      },
    }),
  ]);
  t.match(result, [
    { kind: "ratelimit", namespace: "orders.per ip", cost: 1, identifiers: [{ kind: "remoteIp" }] },
    { kind: "ratelimit", namespace: "api", cost: 2, identifiers: [{ kind: "principalField", path: ["meta", "plan"] }, { kind: "keyId" }] },
  ]);
});

t.test("a cors policy: exact origins in any case, regexes matching the whole origin, keygate's headers exposed", async (t) => {
  const { result, problems } = compiled([
    policy({
      cors: {
        allowOrigins: [{ exact: "https://App.example.com" }, { regex: "https://[a-z0-9-]+\\.example\\.org" }],
        exposeHeaders: ["X-Trace"],
        allowMethods: ["GET", "POST"],
        maxAgeSeconds: 600,
      },
    }),
  ]);
  t.same(problems, []);
  const cors = result[0];
  if (cors?.kind !== "cors") return t.fail("a cors policy");
  const { rule } = cors;
  t.same(
    [
      "https://app.example.com",
      "https://a-1.example.org",
      "https://example.org",
      "https://a.example.org.evil.test",
      "http://app.example.com",
    ].map(rule.allows),
    [true, true, false, false, false],
  );
  t.equal(rule.anyOrigin, false);
  t.equal(rule.allowMethods, "GET, POST");
  t.equal(rule.maxAge, "600");
  t.match(rule.exposeHeaders, /^x-request-id, ratelimit, .*retry-after, x-trace$/);
  const any = compiled([policy({ cors: { allowOrigins: "*" } })]).result[0];
  const anyWithCredentials = compiled([policy({ cors: { allowOrigins: "*", allowCredentials: true } })]).result[0];
  t.equal(any?.kind === "cors" && any.rule.anyOrigin, true, "'*' answers '*'");
  t.equal(anyWithCredentials?.kind === "cors" && anyWithCredentials.rule.anyOrigin, false, "with credentials the origin is named");
});

t.test("a cors policy's problems are named by their field", async (t) => {
  const { result, problems } = compiled([
    policy({ cors: { allowOrigins: [{ exact: "https://a.test/" }, { regex: "(" }, { exact: "https://b.test", regex: "x" }, {}] } }),
  ]);
  t.same(result, []);
  t.same(
    problems.map((problem) => problem.at),
    [
      "policies[0].cors.allowOrigins[0].exact",
      "policies[0].cors.allowOrigins[1].regex",
      "policies[0].cors.allowOrigins[2]",
      "policies[0].cors.allowOrigins[3]",
    ],
  );
});

t.test("stripPrefix and rewrite: the prefix's segments removed, then the first match replaced", async (t) => {
  const field = (name: string) => name;
  const problems: Problems = [];
  const strip = compilePathRewrite("/api/v1", true, undefined, field, problems);
  const both = compilePathRewrite("/api", true, { regex: "^/users/([^/]+)$", replacement: "/u/$1/profile" }, field, problems);
  const rewriteOnly = compilePathRewrite("/api", false, { regex: "^/api/(.*)", replacement: "v2/$1" }, field, problems);
  t.same(problems, []);
  t.equal(compilePathRewrite("/api", false, undefined, field, problems), undefined, "nothing to do: no rewrite at all");
  t.equal(compilePathRewrite("", true, undefined, field, problems), undefined, "the prefix '/' strips nothing");
  if (!strip || !both || !rewriteOnly) return t.fail("compiled");
  t.same(
    ["/api/v1", "/api/v1/", "/api/v1/x/y", "/api/v1/a%20b"].map((path) => rewritePath(strip, path)),
    ["", "/", "/x/y", "/a%20b"],
  );
  t.same(
    ["/api/users/a%2Fb", "/api/other"].map((path) => rewritePath(both, path)),
    ["/u/a%2Fb/profile", "/other"],
  );
  t.equal(rewritePath(rewriteOnly, "/api/x"), "/v2/x", "a rewritten path gets its leading '/'");

  const bad: Problems = [];
  compilePathRewrite("/api", false, { regex: "([a-z]", replacement: "/" }, field, bad);
  compilePathRewrite("/api", false, { regex: "^/(a)/(b)$", replacement: "/$3 $$4 $1" }, field, bad);
  t.same(
    bad.map((problem) => [problem.at, problem.message.replace(/:.*/, "")]),
    [
      ["rewrite.regex", "is not a valid RE2 regular expression"],
      ["rewrite.replacement", "names group $3, but the regex has 2 groups"],
    ],
  );
});
