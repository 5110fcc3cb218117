import t from "tap";
import { compileStringMatch, type MatchedRequest } from "../../../src/domain/routes/match-expressions.js";
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
  t.equal(rule?.message, "must set exactly one of keyauth, ratelimit, firewall, openapi, logging");
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
