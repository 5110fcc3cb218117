import t from "tap";
import { PermissionSet } from "../../src/domain/permissions/permission-set.js";
import { formatQuery, PermissionQuerySyntaxError, parsePermissionQuery } from "../../src/domain/permissions/query.js";

function syntaxError(query: string): { message: string; position: number } {
  try {
    parsePermissionQuery(query);
  } catch (error) {
    if (error instanceof PermissionQuerySyntaxError) return { message: error.message, position: error.position };
    throw error;
  }
  throw new Error(`'${query}' parsed`);
}

t.test("a single permission name is a query", async (t) => {
  t.same(parsePermissionQuery("documents.read"), { kind: "permission", name: "documents.read" });
  t.same(parsePermissionQuery("  a:b/c-d_e.*  "), { kind: "permission", name: "a:b/c-d_e.*" }, "every allowed character");
});

t.test("AND binds tighter than OR, parentheses group, keywords in any case", async (t) => {
  t.equal(formatQuery(parsePermissionQuery("a OR b AND c")), "a OR b AND c");
  t.same(parsePermissionQuery("a or b and c"), {
    kind: "or",
    operands: [
      { kind: "permission", name: "a" },
      {
        kind: "and",
        operands: [
          { kind: "permission", name: "b" },
          { kind: "permission", name: "c" },
        ],
      },
    ],
  });
  t.equal(formatQuery(parsePermissionQuery("(a OR b) And c")), "(a OR b) AND c");
  t.equal(
    formatQuery(parsePermissionQuery("admin OR (documents.read AND documents.write)")),
    "admin OR documents.read AND documents.write",
  );
  t.equal(formatQuery(parsePermissionQuery("((a))")), "a");
  t.equal(formatQuery(parsePermissionQuery("a AND b AND c OR d OR e")), "a AND b AND c OR d OR e");
  t.same(parsePermissionQuery("ANDROID.read"), { kind: "permission", name: "ANDROID.read" }, "keywords are whole words only");
});

t.test("every class of syntax error names its position", async (t) => {
  t.same(syntaxError(""), { message: "the query is empty", position: 1 });
  t.same(syntaxError("   "), { message: "the query is empty", position: 1 });
  t.same(syntaxError("a AND b!"), { message: "unexpected character '!' at position 8", position: 8 });
  t.same(syntaxError("AND a"), { message: "expected a permission or '(' at position 1, found operator AND", position: 1 });
  t.same(syntaxError("a OR"), { message: "expected a permission or '(' at position 5, found the end of the query", position: 5 });
  t.same(syntaxError("a AND OR b"), { message: "expected a permission or '(' at position 7, found operator OR", position: 7 });
  t.same(syntaxError("a b"), { message: "expected AND, OR or the end of the query at position 3, found 'b'", position: 3 });
  t.same(syntaxError("(a AND b"), {
    message: "expected ')' to close the '(' at position 1, found the end of the query at position 9",
    position: 9,
  });
  t.same(syntaxError("a)"), { message: "unmatched ')' at position 2", position: 2 });
  t.same(syntaxError("()"), { message: "expected a permission or '(' at position 2, found ')'", position: 2 });
  t.same(syntaxError("a AND (b OR c"), {
    message: "expected ')' to close the '(' at position 7, found the end of the query at position 14",
    position: 14,
  });
  t.same(syntaxError("a".repeat(1001)), { message: "the query is longer than 1000 characters", position: 1001 });
  t.doesNotThrow(() => parsePermissionQuery("a".repeat(1000)), "exactly 1000 characters is allowed");
});

t.test("deep nesting within the length limit parses", async (t) => {
  const depth = 400;
  t.equal(formatQuery(parsePermissionQuery(`${"(".repeat(depth)}a${")".repeat(depth)}`)), "a");
});

t.test("wildcards grant everything below their prefix, at any depth", async (t) => {
  const held = new PermissionSet(["documents.*", "billing.read"]);
  t.ok(held.has("documents.read"));
  t.ok(held.has("documents.a.b.c"));
  t.notOk(held.has("documents"), "not the prefix itself");
  t.notOk(held.has("documentsX.read"), "the dot is part of the prefix");
  t.ok(held.has("billing.read"));
  t.notOk(held.has("billing.write"));
  t.ok(new PermissionSet(["*"]).has("anything.at.all"), "* grants everything");
  const nested = new PermissionSet(["a.b.*"]);
  t.ok(nested.has("a.b.c"));
  t.notOk(nested.has("a.c"));
  t.ok(new PermissionSet(["api.*"]).has("api.*.read_api"), "a held wildcard also covers a required name containing *");
});

t.test("queries evaluate over held permissions", async (t) => {
  const held = new PermissionSet(["documents.read", "admin.*"]);
  t.ok(held.satisfies(parsePermissionQuery("documents.read")));
  t.notOk(held.satisfies(parsePermissionQuery("documents.read AND documents.write")));
  t.ok(held.satisfies(parsePermissionQuery("documents.write OR admin.users")));
  t.ok(held.satisfies(parsePermissionQuery("(documents.write OR documents.read) AND admin.x")));
  t.notOk(held.satisfies(parsePermissionQuery("documents.write OR billing.read")));
});

t.test("explanations name only what is missing", async (t) => {
  const held = new PermissionSet(["a"]);
  t.equal(held.explainMissing(parsePermissionQuery("a")), undefined);
  t.equal(held.explainMissing(parsePermissionQuery("b")), "Missing permission: 'b'");
  t.equal(held.explainMissing(parsePermissionQuery("b OR c")), "Missing one of these permissions: 'b' or 'c'");
  t.equal(
    held.explainMissing(parsePermissionQuery("a AND b AND (c OR d)")),
    "Missing permission: 'b'; Missing one of these permissions: 'c' or 'd'",
  );
  t.equal(
    held.explainMissing(parsePermissionQuery("b AND c OR d")),
    "Missing one of: (Missing permission: 'b'; Missing permission: 'c') or (Missing permission: 'd')",
  );
});
