import t from "tap";
import { parseExplainAst, printAst, UnreadableAstError } from "../../src/domain/analytics/explain-ast.js";
import { inspectAst } from "../../src/domain/analytics/query-shape.js";
import { VERIFICATION_TABLES } from "../../src/domain/analytics/tables.js";
import { KeygateError } from "../../src/errors/keygate-error.js";

const inspect = (root: Parameters<typeof inspectAst>[0]) => inspectAst(root, VERIFICATION_TABLES);

// EXPLAIN AST output of ClickHouse 26.7 (chDB) for the example query of docs/decisions.md#analytics, as the engine
// prints it.
const EXAMPLE_QUERY_AST = `SelectWithUnionQuery (children 1)
 ExpressionList (children 1)
  SelectQuery (children 6)
   ExpressionList (children 3)
    Identifier external_id
    Function SUM (alias total) (children 1)
     ExpressionList (children 1)
      Identifier count
    Function sumIf (alias valid) (children 1)
     ExpressionList (children 2)
      Identifier count
      Function equals (children 1)
       ExpressionList (children 2)
        Identifier outcome
        Literal 'VALID'
   TablesInSelectQuery (children 1)
    TablesInSelectQueryElement (children 1)
     TableExpression (children 1)
      TableIdentifier key_verifications_per_day_v1
   Function greaterOrEquals (children 1)
    ExpressionList (children 2)
     Identifier time
     Function minus (children 1)
      ExpressionList (children 2)
       Function now (children 1)
        ExpressionList
       Function toIntervalDay (children 1)
        ExpressionList (children 1)
         Literal UInt64_7
   ExpressionList (children 1)
    Identifier external_id
   ExpressionList (children 1)
    OrderByElement (children 1)
     Identifier total
   Literal UInt64_10
`;

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (error) {
    return error instanceof KeygateError ? error.code : String(error);
  }
}

t.test("reads the example query's tree: types, names, aliases and children", async (t) => {
  const root = parseExplainAst(EXAMPLE_QUERY_AST);
  t.equal(root.type, "SelectWithUnionQuery");
  const select = root.children[0]?.children[0];
  t.equal(select?.children.length, 6);
  const sum = select?.children[0]?.children[1];
  t.same({ type: sum?.type, name: sum?.name, alias: sum?.alias }, { type: "Function", name: "SUM", alias: "total" });
  t.equal(printAst(root), EXAMPLE_QUERY_AST.trimEnd(), "printing it back gives the engine's text");
  t.same(inspect(root), [], "allowed, and it names no key space");
});

t.test("fails closed on text it does not understand", async (t) => {
  const cases: Record<string, string> = {
    "a children count that does not match": "SelectWithUnionQuery (children 2)\n ExpressionList\n",
    "a skipped indentation level": "SelectWithUnionQuery (children 1)\n   ExpressionList\n",
    "two statements": "SelectWithUnionQuery\nSelectWithUnionQuery\n",
    "an unreadable line": "SelectWithUnionQuery (children 1)\n Identifier a b c\n",
    "a tab for indentation": "SelectWithUnionQuery (children 1)\n\tExpressionList\n",
    nothing: "",
  };
  for (const [what, text] of Object.entries(cases)) t.throws(() => parseExplainAst(text), UnreadableAstError, what);
});

t.test("a forged line break inside an identifier does not survive: the counts no longer add up", async (t) => {
  // What EXPLAIN AST prints for SELECT `a\n   TableIdentifier x` AS `al\n(ias) b`, 'str\nx' FROM `t\tt`.
  const forged =
    "SelectWithUnionQuery (children 1)\n ExpressionList (children 1)\n  SelectQuery (children 2)\n   ExpressionList (children 2)\n    Identifier a\n   TableIdentifier x (alias al\n(ias) b)\n    Literal 'str\\nx'\n   TablesInSelectQuery (children 1)\n    TablesInSelectQueryElement (children 1)\n     TableExpression (children 1)\n      TableIdentifier t\tt\n";
  t.throws(() => parseExplainAst(forged), UnreadableAstError);
});

t.test("only a single SELECT without FORMAT, OUTFILE or SETTINGS passes", async (t) => {
  t.equal(
    codeOf(() => inspect(parseExplainAst("InsertQuery (children 1)\n Identifier t\n"))),
    "err:user:bad_request:invalid_analytics_query_type",
  );
  t.equal(
    codeOf(() => inspect(parseExplainAst("AlterQuery (children 1)\n Identifier t\n"))),
    "err:user:bad_request:invalid_analytics_query_type",
  );
  const withFormat =
    "SelectWithUnionQuery (children 2)\n ExpressionList (children 1)\n  SelectQuery (children 1)\n   ExpressionList (children 1)\n    Literal UInt64_1\n Identifier JSON\n";
  t.equal(
    codeOf(() => inspect(parseExplainAst(withFormat))),
    "err:user:bad_request:invalid_analytics_query",
  );
  const withSettings =
    "SelectWithUnionQuery (children 1)\n ExpressionList (children 1)\n  SelectQuery (children 2)\n   ExpressionList (children 1)\n    Literal UInt64_1\n   Set\n";
  t.equal(
    codeOf(() => inspect(parseExplainAst(withSettings))),
    "err:user:bad_request:invalid_analytics_query",
  );
});

t.test("functions outside the allow-list, table functions and database-qualified tables are refused", async (t) => {
  const select = (expression: string, from = "") =>
    `SelectWithUnionQuery (children 1)\n ExpressionList (children 1)\n  SelectQuery (children ${from ? 2 : 1})\n   ExpressionList (children 1)\n${expression}${from}`;
  t.equal(
    codeOf(() => inspect(parseExplainAst(select("    Function hostName (children 1)\n     ExpressionList\n")))),
    "err:user:bad_request:invalid_analytics_function",
  );
  t.same(
    inspect(parseExplainAst(select("    Function CouNT (children 1)\n     ExpressionList\n"))),
    [],
    "names are compared case-insensitively",
  );
  const from = (table: string) =>
    `   TablesInSelectQuery (children 1)\n    TablesInSelectQueryElement (children 1)\n     TableExpression (children 1)\n${table}`;
  t.equal(
    codeOf(() =>
      inspect(
        parseExplainAst(
          select(
            "    Asterisk\n",
            from("      Function numbers (children 1)\n       ExpressionList (children 1)\n        Literal UInt64_1\n"),
          ),
        ),
      ),
    ),
    "err:user:bad_request:invalid_analytics_function",
  );
  t.equal(
    codeOf(() => inspect(parseExplainAst(select("    Asterisk\n", from("      TableIdentifier system.one\n"))))),
    "err:user:bad_request:invalid_analytics_table",
  );
});

t.test("collects the key space ids compared with key_space_id", async (t) => {
  const ast = `SelectWithUnionQuery (children 1)
 ExpressionList (children 1)
  SelectQuery (children 2)
   ExpressionList (children 1)
    Asterisk
   Function or (children 1)
    ExpressionList (children 2)
     Function equals (children 1)
      ExpressionList (children 2)
       Literal 'ks_one'
       Identifier k.key_space_id
     Function in (children 1)
      ExpressionList (children 2)
       Identifier key_space_id
       Literal Tuple_('ks_two', 'ks_thr\\'ee', '')
`;
  t.same(inspect(parseExplainAst(ast)), ["ks_one", "ks_two", "ks_thr'ee"]);
});
