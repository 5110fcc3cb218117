import t from "tap";
import { ConfigError, validateConfig } from "../../src/config/load.js";
import { ConfigSchema } from "../../src/config/schema.js";
import { describedPattern, patternWords } from "../../src/http/patterns.js";
import { PROCEDURES } from "../../src/routes/v2/index.js";
import { assertInvalidAt } from "../helpers/assertions.js";
import { harness } from "../helpers/harness.js";

/** Every `pattern` keyword in a JSON schema, however deep. */
function patternsIn(schema: unknown, found = new Set<string>()): Set<string> {
  if (Array.isArray(schema)) for (const item of schema) patternsIn(item, found);
  else if (schema !== null && typeof schema === "object") {
    for (const [keyword, value] of Object.entries(schema)) {
      if (keyword === "pattern" && typeof value === "string") found.add(value);
      else patternsIn(value, found);
    }
  }
  return found;
}

function problemsOf(raw: unknown): readonly string[] {
  try {
    validateConfig(raw);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

t.test("every pattern of a /v2 body or the configuration is declared with words", async (t) => {
  const patterns = patternsIn([ConfigSchema, ...PROCEDURES.map((procedure) => procedure.body)]);
  t.ok(patterns.size >= 15, `found the patterns (${patterns.size})`);
  for (const pattern of patterns) t.type(patternWords(pattern), "string", `words for ${pattern}`);
});

t.test("one expression cannot be declared with two different sets of words", async (t) => {
  t.equal(describedPattern("^x+$", "contain only x"), "^x+$");
  t.equal(describedPattern("^x+$", "contain only x"), "^x+$", "the same words again are fine");
  t.throws(() => describedPattern("^x+$", "be xs"), /declared as 'contain only x' and as 'be xs'/);
});

t.test("configuration problems say in words what a value must look like, never as a regular expression", async (t) => {
  const route = { name: "orders", match: { prefix: "/orders" }, upstream: "http://127.0.0.1:9001", apiId: "api_orders" };
  for (const upstream of ["ftp://x", "http://", "https:///path", "http://host name", "127.0.0.1:9001"]) {
    t.same(
      problemsOf({ routes: [{ ...route, upstream }] }),
      ["routes[0].upstream: must be an http:// or https:// URL with a host"],
      upstream,
    );
  }
  t.same(
    problemsOf({ routes: [{ ...route, upstream: "http://upstream.internal:9001/base" }] }),
    [],
    "a URL with a host and a path is fine",
  );
  t.same(problemsOf({ routes: [{ ...route, name: "has space" }] }), ["routes[0].name: must contain only letters, digits, ., _ and -"]);
  t.same(problemsOf({ routes: [{ ...route, key: { header: "x api key" } }] }), [
    "routes[0].key.header: must be an HTTP header name (letters, digits and ! # $ % & ' * + . ^ _ ` | ~ -)",
  ]);
  t.same(problemsOf({ errors: { docsUrl: "docs.example.com" } }), ["errors.docsUrl: must be an http:// or https:// URL"]);
  t.same(problemsOf({ analytics: { clickhouse: { database: "1st" } } }), [
    "analytics.clickhouse.database: must start with a letter or _ and contain only letters, digits and _",
  ]);
  t.same(problemsOf({ apis: [{ id: "api orders", name: "orders", workspaceId: "ws_a" }] }), [
    "apis[0].id: must contain only letters, digits and _",
  ]);
  const expressions = [...patternsIn(ConfigSchema)];
  for (const raw of [
    { routes: [{ ...route, upstream: "x", match: { prefix: "x" } }] },
    { storage: { redis: { url: "http://x", prefix: "a b" } } },
  ]) {
    for (const problem of problemsOf(raw)) {
      t.notOk(
        expressions.some((expression) => problem.includes(expression)) || problem.includes("pattern"),
        `no regular expression in: ${problem}`,
      );
    }
  }
});

t.test("/v2 400s say in words what a value must look like", async (t) => {
  const h = await harness(t);
  assertInvalidAt(
    t,
    await h.call("permissions.setRolePermissions", { roleId: "role.x", permissions: [] }),
    "body.roleId",
    "must contain only letters, digits, _ and -",
  );
  assertInvalidAt(
    t,
    await h.call("keys.createKey", { apiId: "api_x", prefix: "sk-live" }),
    "body.prefix",
    "must contain only letters, digits and _",
  );
  assertInvalidAt(
    t,
    await h.call("keys.createKey", { apiId: "api_x", externalId: "a b" }),
    "body.externalId",
    "must contain only letters, digits, _, . and -",
  );
  assertInvalidAt(
    t,
    await h.call("permissions.createPermission", { name: "n", slug: "a b" }),
    "body.slug",
    "must contain only letters, digits and the characters _ : - . * /",
  );
  assertInvalidAt(
    t,
    await h.call("permissions.createRole", { name: "a/b" }),
    "body.name",
    "must contain only letters, digits and the characters _ : - . *",
  );
  assertInvalidAt(
    t,
    await h.call("keys.verifyKey", { key: "k", tags: ["a b"] }),
    "body.tags[0]",
    "must contain only letters, digits and the characters _ = / . : -",
  );
  assertInvalidAt(
    t,
    await h.call("apis.createApi", { name: "9lives" }),
    "body.name",
    "must start with a letter and contain only letters, digits, ., _ and -",
  );
});
