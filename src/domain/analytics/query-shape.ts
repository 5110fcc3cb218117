import { type AstNode, printAst, walk } from "./explain-ast.js";
import { isAllowedFunction } from "./functions.js";
import { invalid, onlySelect, quotedIdentifier, unknownTable } from "./query-refusals.js";
import type { TableFamily } from "./tables.js";

// What a customer's query may look like: checks on the engine's syntax tree and its shape of the query.

const NODE_TYPES = new Set([
  "SelectWithUnionQuery",
  "SelectQuery",
  "ExpressionList",
  "TablesInSelectQuery",
  "TablesInSelectQueryElement",
  "TableExpression",
  "TableIdentifier",
  "TableJoin",
  "ArrayJoin",
  "Subquery",
  "WithElement",
  "Identifier",
  "Function",
  "Literal",
  "Asterisk",
  "QualifiedAsterisk",
  "ColumnsTransformerList",
  "ColumnsExceptTransformer",
  "ColumnsReplaceTransformer",
  "ColumnsReplaceTransformer::Replacement",
  "OrderByElement",
  "WindowDefinition",
  "WindowListElement",
]);

/** Why some node types are refused, in the customer's words. */
const REFUSED_NODE_TYPES: Record<string, string> = {
  Set: "SETTINGS is not allowed in analytics queries.",
  SelectIntersectExceptQuery: "INTERSECT and EXCEPT are not supported; use IN with a subquery.",
  SampleRatio: "SAMPLE is not supported.",
  ColumnsApplyTransformer: "APPLY is not supported.",
  ColumnsRegexpMatcher: "COLUMNS('regexp') is not supported; name the columns.",
  ColumnsListMatcher: "COLUMNS(...) is not supported; name the columns.",
  QueryParameter: "Query parameters ({name:Type}) are not supported.",
};

const KEY_SPACE_COMPARISONS = new Set(["equals", "notequals", "in", "notin"]);
const IN_FUNCTIONS = new Set(["in", "notin", "globalin", "globalnotin", "nullin", "notnullin", "globalnullin", "globalnotnullin"]);

/**
 * The syntax tree must be one SELECT (with UNION, CTEs and subqueries) over tables named without a database,
 * calling allowed functions only. Returns the key space ids the query compares `key_space_id` with.
 */
export function inspectAst(root: AstNode, family: TableFamily): string[] {
  if (root.type !== "SelectWithUnionQuery") throw onlySelect();
  if (root.children.length !== 1)
    throw invalid("err:user:bad_request:invalid_analytics_query", "FORMAT, INTO OUTFILE and SETTINGS clauses are not allowed.");
  const keySpaces: string[] = [];
  for (const { node, parent } of walk(root)) {
    if (!NODE_TYPES.has(node.type)) {
      throw invalid(
        "err:user:bad_request:invalid_analytics_query",
        REFUSED_NODE_TYPES[node.type] ?? `The query uses '${node.type}', which analytics queries do not support.`,
      );
    }
    const name = node.name ?? "";
    if (node.type === "Function") {
      if (parent?.type === "TableExpression")
        throw invalid("err:user:bad_request:invalid_analytics_function", `Table functions are not allowed ('${name}').`);
      if (!isAllowedFunction(name))
        throw invalid("err:user:bad_request:invalid_analytics_function", `The function '${name}' is not allowed in analytics queries.`);
      if (KEY_SPACE_COMPARISONS.has(name.toLowerCase())) keySpaces.push(...keySpaceLiterals(node));
      // `x IN table` reads a table through a name that is not a table expression; a subquery says the same openly.
      if (IN_FUNCTIONS.has(name.toLowerCase()) && node.children[0]?.children[1]?.type === "Identifier") {
        throw invalid("err:user:bad_request:invalid_analytics_query", "IN needs a list of values or a subquery, not a table name.");
      }
    }
    if (node.type === "TableIdentifier" && name.includes(".")) throw unknownTable(name, family);
  }
  return [...new Set(keySpaces)];
}

function keySpaceLiterals(comparison: AstNode): string[] {
  const operands = comparison.children[0]?.children ?? [];
  if (operands.length !== 2) return [];
  const isKeySpaceColumn = (node: AstNode) =>
    node.type === "Identifier" && (node.name === "key_space_id" || (node.name ?? "").endsWith(".key_space_id"));
  const [left, right] = operands as [AstNode, AstNode];
  const other = isKeySpaceColumn(left) ? right : isKeySpaceColumn(right) ? left : undefined;
  if (!other) return [];
  const literals =
    other.type === "Literal"
      ? [other]
      : other.type === "Function"
        ? [...walk(other)].map(({ node }) => node).filter((node) => node.type === "Literal")
        : [];
  const values: string[] = [];
  for (const literal of literals) {
    for (const match of (literal.name ?? "").matchAll(/'((?:[^'\\]|\\.)*)'/g)) {
      const value = (match[1] as string).replace(/\\(.)/g, "$1");
      if (value !== "") values.push(value);
    }
  }
  return values;
}

/**
 * The composed statement must parse to the query's own tree plus one SETTINGS clause, attached where it governs
 * the whole statement: the last SELECT of the top-level UNION. Anything else means the composition changed the
 * query, and it does not run.
 */
export function verifyComposition(query: AstNode, composed: AstNode): void {
  const sets = [...walk(composed)].filter(({ node }) => node.type === "Set");
  const union = composed.children[0];
  const lastSelect = union?.children[union.children.length - 1];
  const placed =
    sets.length === 1 &&
    sets[0]?.parent === lastSelect &&
    lastSelect?.type === "SelectQuery" &&
    lastSelect.children[lastSelect.children.length - 1] === sets[0]?.node;
  if (placed) lastSelect.children.pop();
  if (!placed || printAst(composed) !== printAst(query)) {
    throw invalid(
      "err:user:bad_request:invalid_analytics_query",
      "The query's shape is not supported; write it as one SELECT (with UNION, subqueries or CTEs).",
    );
  }
}

/**
 * Identifiers are printed raw by EXPLAIN AST, so one holding a line break could forge lines. The engine's shape of
 * the query (literals replaced by `?`, names kept) shows every quoted identifier between backquotes; each must be
 * a plain word.
 */
export function checkQuotedIdentifiers(shape: string): void {
  if (shape.includes('"')) throw quotedIdentifier();
  for (let start = shape.indexOf("`"); start >= 0; start = shape.indexOf("`", start)) {
    const end = shape.indexOf("`", start + 1);
    const name = end < 0 ? "" : shape.slice(start + 1, end);
    if (!/^[A-Za-z0-9_]+$/.test(name)) throw quotedIdentifier();
    start = end + 1;
  }
}
