import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Test } from "tap";
import type { ErrorCode } from "../../src/errors/catalogue.js";
import { DEFAULT_DOCS_URL, ERROR_CATALOGUE, errorTypeUrl } from "../../src/errors/catalogue.js";
import type { AnalyticsProcedure } from "./analytics.js";
import { type Harness, OTHER_WORKSPACE, WORKSPACE } from "./harness.js";

/**
 * Queries written to get at rows, tables, files, URLs or settings they must not reach, or to write, or to exhaust
 * the engine; the same attacks serve every analytics procedure, written over its own tables (hostileQueriesOver).
 */

type Expectation = ErrorCode | "confined";
export interface Hostile {
  what: string;
  sql: string;
  /** The answer: confined, or refused with this code (or with any of these, where the machine decides which limit trips first). */
  expect: Expectation | readonly ErrorCode[];
  /** Runs with the key confined to part of the workspace (one API, one namespace). */
  scoped?: boolean;
  /** Further checks of a confined answer. */
  rows?: (rows: Record<string, unknown>[]) => boolean;
}

export const BAD_TABLE = "err:user:bad_request:invalid_analytics_table";
export const BAD_FUNCTION = "err:user:bad_request:invalid_analytics_function";
export const BAD_QUERY = "err:user:bad_request:invalid_analytics_query";
export const NOT_SELECT = "err:user:bad_request:invalid_analytics_query_type";
/** Where INTO OUTFILE would write; it must never exist. */
export const OUTFILE = join(tmpdir(), `keygate-leak-${process.pid}.tsv`);

/** One procedure's tables, as the attacks below name them. */
export interface HostileTarget {
  /** The raw table (at least 200 rows of the workspace, so that cross joins and UNIONs exceed the limits). */
  raw: string;
  /** An aggregate table, or the raw table again when the family has none. */
  aggregate: string;
  /** A materialized view of the engine's database that no query may read. */
  view: string;
  /** A String column of the raw table and the aggregate. */
  text: string;
  /** Tables of the other families, which this procedure may not read. */
  foreign: readonly string[];
}

const none = (r: Record<string, unknown>[]) => r.length === 0;
const zero = (r: Record<string, unknown>[]) => r[0]?.n === 0;

/** The attacks every analytics procedure must withstand, over `target`'s tables. */
export function hostileQueriesOver({ raw, aggregate, view, text, foreign }: HostileTarget): Hostile[] {
  return [
    // other workspaces' rows, by every route
    {
      what: "asking for the other workspace by name",
      sql: `SELECT * FROM ${raw} WHERE workspace_id = 'ws_other'`,
      expect: "confined",
      rows: none,
    },
    {
      what: "everything that is not ours",
      sql: `SELECT count() AS n FROM ${raw} WHERE workspace_id != 'ws_test'`,
      expect: "confined",
      rows: zero,
    },
    {
      what: "an OR that is always true",
      sql: `SELECT DISTINCT workspace_id FROM ${raw} WHERE 1 = 1 OR workspace_id = 'ws_other'`,
      expect: "confined",
      rows: (r) => r.length === 1 && r[0]?.workspace_id === WORKSPACE,
    },
    {
      what: "PREWHERE instead of WHERE",
      sql: `SELECT * FROM ${raw} PREWHERE workspace_id = 'ws_other'`,
      expect: "confined",
      rows: none,
    },
    { what: "FINAL", sql: `SELECT * FROM ${raw} FINAL WHERE workspace_id = 'ws_other'`, expect: BAD_QUERY },
    {
      what: "a subquery",
      sql: `SELECT ${text} FROM (SELECT * FROM ${raw}) WHERE workspace_id = 'ws_other'`,
      expect: "confined",
      rows: none,
    },
    {
      what: "a CTE",
      sql: `WITH others AS (SELECT * FROM ${raw} WHERE workspace_id = 'ws_other') SELECT ${text} FROM others`,
      expect: "confined",
      rows: none,
    },
    {
      what: "a UNION branch",
      sql: `SELECT ${text} FROM ${raw} WHERE 0 UNION ALL SELECT ${text} FROM ${aggregate} WHERE workspace_id = 'ws_other'`,
      expect: "confined",
      rows: none,
    },
    {
      what: "a self-join across workspaces",
      sql: `SELECT * FROM ${raw} AS t1 JOIN ${raw} AS t2 ON t1.workspace_id != t2.workspace_id`,
      expect: "confined",
      rows: none,
    },
    {
      what: "a scalar subquery",
      sql: `SELECT (SELECT groupArray(${text}) FROM ${raw} WHERE workspace_id = 'ws_other') AS leaked`,
      expect: "confined",
      rows: (r) => JSON.stringify(r) === '[{"leaked":[]}]',
    },
    {
      what: "a scalar subquery folded into an error message",
      sql: `SELECT toDate((SELECT any(${text}) FROM ${raw} WHERE workspace_id = 'ws_other')) AS d`,
      expect: "confined",
    },
    {
      what: "an IN subquery",
      sql: `SELECT count() AS n FROM ${raw} WHERE workspace_id IN (SELECT workspace_id FROM ${raw} WHERE workspace_id = 'ws_other')`,
      expect: "confined",
      rows: zero,
    },
    { what: "IN with a table name", sql: `SELECT count() FROM ${raw} WHERE workspace_id IN ${aggregate}`, expect: BAD_QUERY },
    {
      what: "every workspace of a table",
      sql: `SELECT groupUniqArray(workspace_id) AS ws FROM ${aggregate}`,
      expect: "confined",
      rows: (r) => JSON.stringify(r) === `[{"ws":["${WORKSPACE}"]}]`,
    },
    { what: "the physical database name", sql: `SELECT * FROM keygate.${raw}`, expect: BAD_TABLE },
    { what: "a materialized view", sql: `SELECT * FROM ${view}`, expect: BAD_TABLE },
    {
      what: "a CTE name that is a view name in an outer scope",
      sql: `SELECT * FROM (WITH ${view} AS (SELECT 1 AS x) SELECT x FROM ${view}) AS a, ${view} AS b`,
      expect: BAD_TABLE,
    },
    {
      what: "a look-alike quote",
      sql: `SELECT ${text} FROM ${raw} WHERE workspace_id = \u2018ws_other\u2019`,
      expect: "confined",
      rows: none,
    },
    // the tables of the other procedures, by every route
    ...foreign.flatMap((table): Hostile[] => [
      { what: `${table} directly`, sql: `SELECT * FROM ${table}`, expect: BAD_TABLE },
      { what: `${table} in a subquery`, sql: `SELECT count() AS n FROM (SELECT * FROM ${table})`, expect: BAD_TABLE },
      { what: `${table} in a CTE`, sql: `WITH f AS (SELECT * FROM ${table}) SELECT count() AS n FROM f`, expect: BAD_TABLE },
      {
        what: `${table} in a UNION`,
        sql: `SELECT toString(count()) AS s FROM ${raw} UNION ALL SELECT toString(count()) FROM ${table}`,
        expect: BAD_TABLE,
      },
      {
        what: `${table} in a JOIN`,
        sql: `SELECT count() AS n FROM ${raw} AS a JOIN ${table} AS b ON a.workspace_id = b.workspace_id`,
        expect: BAD_TABLE,
      },
      { what: `${table} in an IN subquery`, sql: `SELECT 1 AS one WHERE 'x' IN (SELECT workspace_id FROM ${table})`, expect: BAD_TABLE },
      { what: `${table} in a scalar subquery`, sql: `SELECT (SELECT count() FROM ${table}) AS n`, expect: BAD_TABLE },
      { what: `${table} under the physical database name`, sql: `SELECT * FROM keygate.${table}`, expect: BAD_TABLE },
    ]),
    // keygate's own tables that no procedure reads (usage reads the refunds for itself)
    { what: "the refunds table", sql: "SELECT * FROM credit_refunds_v1", expect: BAD_TABLE },
    {
      what: "the refunds table in a subquery",
      sql: `SELECT count() AS n FROM ${raw} WHERE request_id IN (SELECT request_id FROM credit_refunds_v1)`,
      expect: BAD_TABLE,
    },
    // system tables and other databases
    { what: "system.tables", sql: "SELECT * FROM system.tables", expect: BAD_TABLE },
    { what: "system.one quoted", sql: "SELECT * FROM `system`.`one`", expect: BAD_TABLE },
    { what: "system tables in double quotes", sql: 'SELECT * FROM "system"."query_log"', expect: BAD_TABLE },
    { what: "information_schema", sql: "SELECT * FROM INFORMATION_SCHEMA.COLUMNS", expect: BAD_TABLE },
    { what: "IN system.one", sql: "SELECT 1 WHERE 1 IN system.one", expect: BAD_QUERY },
    { what: "a dotted name in backquotes", sql: "SELECT * FROM `system.tables`", expect: BAD_QUERY },
    // table functions
    ...[
      "file('/etc/passwd', 'LineAsString')",
      "url('http://127.0.0.1:1/', 'LineAsString')",
      "remote('127.0.0.1', system.one)",
      "s3('http://127.0.0.1:1/bucket/x.csv')",
      "merge('keygate', '.*')",
      "executable('cat /etc/passwd', 'TSV', 'x String')",
      `view(SELECT * FROM ${raw})`,
      "numbers(10)",
      "input('x String')",
      "cluster('default', system.one)",
    ].map((call): Hostile => ({ what: `table function ${call.split("(")[0]}`, sql: `SELECT * FROM ${call}`, expect: BAD_FUNCTION })),
    // functions that reach outside the rows
    { what: "file() as a function", sql: "SELECT file('/etc/passwd')", expect: BAD_FUNCTION },
    { what: "reading a setting", sql: "SELECT getSetting('additional_table_filters')", expect: BAD_FUNCTION },
    { what: "server facts", sql: "SELECT currentDatabase(), hostName(), version()", expect: BAD_FUNCTION },
    { what: "sleeping", sql: "SELECT sleep(3)", expect: BAD_FUNCTION },
    { what: "dictionaries", sql: "SELECT dictGet('d', 'a', toUInt64(1))", expect: BAD_FUNCTION },
    { what: "joinGet", sql: `SELECT joinGet('keygate.${raw}', '${text}', 'x')`, expect: BAD_FUNCTION },
    {
      what: "a huge range",
      sql: `SELECT count() AS n FROM ${raw} WHERE arrayJoin(range(100000000)) > 0`,
      expect: BAD_FUNCTION,
    },
    // SETTINGS overrides
    { what: "clearing the row filters", sql: `SELECT * FROM ${raw} SETTINGS additional_table_filters = {}`, expect: BAD_QUERY },
    {
      what: "replacing the row filters",
      sql: `SELECT * FROM ${raw} WHERE workspace_id = 'ws_other' SETTINGS additional_table_filters = {'keygate.${raw}':'1'}`,
      expect: BAD_QUERY,
    },
    {
      what: "leaving read-only mode in a subquery",
      sql: `SELECT * FROM (SELECT * FROM ${raw} SETTINGS readonly = 0)`,
      expect: BAD_QUERY,
    },
    { what: "SET", sql: "SET additional_table_filters = ''", expect: NOT_SELECT },
    { what: "FORMAT", sql: "SELECT 1 FORMAT JSON", expect: BAD_QUERY },
    // writes and other statements
    { what: "INSERT", sql: `INSERT INTO ${raw} (workspace_id, ${text}) VALUES ('ws_other', 'x')`, expect: NOT_SELECT },
    { what: "INSERT SELECT", sql: `INSERT INTO ${raw} SELECT * FROM ${raw}`, expect: NOT_SELECT },
    { what: "ALTER DELETE", sql: `ALTER TABLE ${raw} DELETE WHERE 1`, expect: NOT_SELECT },
    { what: "DROP", sql: `DROP TABLE ${raw}`, expect: NOT_SELECT },
    { what: "TRUNCATE", sql: `TRUNCATE TABLE ${raw}`, expect: NOT_SELECT },
    { what: "CREATE", sql: "CREATE TABLE x (a Int8) ENGINE = Memory", expect: NOT_SELECT },
    { what: "CREATE VIEW", sql: `CREATE VIEW v AS SELECT * FROM ${raw}`, expect: NOT_SELECT },
    { what: "OPTIMIZE", sql: `OPTIMIZE TABLE ${raw} FINAL`, expect: NOT_SELECT },
    { what: "SYSTEM", sql: "SYSTEM SHUTDOWN", expect: NOT_SELECT },
    { what: "USE", sql: "USE system", expect: NOT_SELECT },
    { what: "GRANT", sql: "GRANT ALL ON *.* TO default", expect: NOT_SELECT },
    { what: "EXPLAIN", sql: `EXPLAIN SELECT * FROM ${raw}`, expect: NOT_SELECT },
    { what: "SHOW", sql: "SHOW TABLES", expect: NOT_SELECT },
    { what: "DESCRIBE", sql: `DESCRIBE TABLE ${raw}`, expect: NOT_SELECT },
    { what: "INTO OUTFILE", sql: `SELECT * FROM ${raw} INTO OUTFILE '${OUTFILE}'`, expect: BAD_QUERY },
    // several statements
    { what: "a second statement that writes", sql: `SELECT 1; DROP TABLE ${raw}`, expect: BAD_QUERY },
    { what: "a second statement that reads", sql: "SELECT 1; SELECT * FROM system.tables", expect: BAD_QUERY },
    { what: "a NUL byte before a second statement", sql: `SELECT 1 AS a\u0000; DROP TABLE ${raw}`, expect: BAD_QUERY },
    // comments and quoting
    {
      what: "a line comment hiding a line break",
      sql: `SELECT ${text} FROM ${raw} -- WHERE workspace_id = 'ws_test'\nWHERE workspace_id = 'ws_other'`,
      expect: "confined",
      rows: none,
    },
    { what: "an unterminated block comment", sql: "SELECT 1 /* unterminated", expect: BAD_QUERY },
    {
      what: "a comment before a UNION on a system table",
      sql: "SELECT 1 AS one -- \nUNION ALL SELECT count() FROM system.tables",
      expect: BAD_TABLE,
    },
    {
      what: "a block comment hiding a foreign table",
      sql: `SELECT count() AS n FROM ${raw} /* */ UNION ALL SELECT count() FROM /* ${raw} */ ${foreign[0]}`,
      expect: BAD_TABLE,
    },
    {
      what: "a backquoted public table",
      sql: `SELECT * FROM \`${raw}\` WHERE workspace_id = 'ws_other'`,
      expect: "confined",
      rows: none,
    },
    { what: "an identifier forging an EXPLAIN line", sql: "SELECT 'a' AS `x\n   TableIdentifier system.tables`", expect: BAD_QUERY },
    {
      what: "doubled quotes",
      sql: `SELECT ${text} FROM ${raw} WHERE ${text} = 'x'' OR ''1''=''1'`,
      expect: "confined",
      rows: none,
    },
    {
      what: "a backslash-escaped quote",
      sql: `SELECT ${text} FROM ${raw} WHERE workspace_id = 'ws_test\\' OR 1=1 --'`,
      expect: "confined",
      rows: none,
    },
    { what: "a heredoc string holding SQL", sql: `SELECT $$ '; DROP TABLE ${raw}; -- $$ AS s`, expect: "confined" },
    { what: "APPLY", sql: `SELECT * EXCEPT (request_id) APPLY(toString) FROM ${raw}`, expect: BAD_QUERY },
    { what: "COLUMNS regexp", sql: `SELECT COLUMNS('.*') FROM ${raw}`, expect: BAD_QUERY },
    { what: "a query parameter", sql: "SELECT {p:String}", expect: BAD_QUERY },
    { what: "INTERSECT", sql: "SELECT 1 INTERSECT SELECT 1", expect: BAD_QUERY },
    // huge queries
    { what: "3000 nested parentheses", sql: `SELECT ${"(".repeat(3_000)}1${")".repeat(3_000)}`, expect: BAD_QUERY },
    {
      what: "300 ORs",
      sql: `SELECT count() AS n FROM ${raw} WHERE ${Array.from({ length: 300 }, (_, i) => `${text} = 'u${i}'`).join(" OR ")}`,
      expect: "confined",
    },
    { what: "a query longer than allowed", sql: `SELECT 1 ${"-".repeat(10_000)}`, expect: "err:unkey:application:invalid_input" },
    // exhausting time, memory and rows
    // Counting a five-way cross join needs little memory and far more than the time limit.
    {
      what: "a five-way cross join",
      sql: `SELECT count() FROM ${raw} a, ${raw} b, ${raw} c, ${raw} d, ${raw} e`,
      expect: "err:user:unprocessable_entity:query_execution_timeout",
    },
    // Memory is what this query exhausts, but on a slow or busy machine the time limit may trip first: either refuses.
    {
      what: "a memory-hungry distinct count",
      sql: `SELECT uniqExact(concat(a.request_id, b.request_id, c.request_id, d.request_id)) FROM ${raw} a, ${raw} b, ${raw} c, ${raw} d`,
      expect: ["err:user:unprocessable_entity:query_memory_limit_exceeded", "err:user:unprocessable_entity:query_execution_timeout"],
    },
    {
      what: "a LIMIT far beyond the clamp",
      sql: `SELECT request_id FROM ${raw} ORDER BY request_id LIMIT 100000000`,
      expect: "confined",
      rows: (r) => r.length === 100,
    },
    {
      what: "a UNION past the row limit",
      sql: `SELECT request_id FROM ${raw} UNION ALL SELECT request_id FROM ${raw}`,
      expect: "err:user:unprocessable_entity:query_rows_limit_exceeded",
    },
  ];
}

/** The analytics configuration the hostile queries expect: limits they can trip within a test's patience. */
export const hostileAnalyticsConfig = (path: string) => ({
  analytics: { engine: "embedded", path, query: { maxExecutionMs: 1_500, maxMemoryBytes: 100_000_000, maxResultRows: 100 } },
});

const onlyOurs = (rows: Record<string, unknown>[]) => rows.every((row) => !Object.values(row).includes(OTHER_WORKSPACE));

/**
 * Runs every hostile query through `procedure`: each is refused with the expected error or answered confined to
 * the caller's rows, and no answer, refusal or error message matches `forbidden` (values of another workspace or
 * of the other families' tables), nor for a `scoped` one `outOfScope` (values of what `scopedKey` may not read).
 */
export async function checkHostileQueries(
  t: Test,
  h: Harness,
  procedure: AnalyticsProcedure,
  hostile: readonly Hostile[],
  markers: { forbidden: RegExp; scopedKey: string; outOfScope: RegExp },
): Promise<void> {
  await t.test(`${procedure}: ${hostile.length} hostile queries are each refused or confined, and none leaks a row`, async (t) => {
    for (const each of hostile) {
      const result = await h.call(procedure, { query: each.sql }, each.scoped ? { rootKey: markers.scopedKey } : {});
      const body = JSON.stringify(result.body);
      t.notMatch(body, markers.forbidden, `${each.what}: nothing of the other workspace`);
      if (each.scoped) t.notMatch(body, markers.outOfScope, `${each.what}: nothing beyond the key's scope`);
      if (each.expect === "confined") {
        t.equal(result.status, 200, `${each.what}: answered, confined (${body.slice(0, 200)})`);
        if (result.status === 200) {
          t.ok(onlyOurs(result.body.data), `${each.what}: only our workspace`);
          if (each.rows)
            t.ok(each.rows(result.body.data), `${each.what}: the rows are ours (${JSON.stringify(result.body.data).slice(0, 200)})`);
        }
      } else {
        const accepted: readonly ErrorCode[] = typeof each.expect === "string" ? [each.expect] : each.expect;
        const code = accepted.find((candidate) => result.body?.error?.type === errorTypeUrl(candidate, DEFAULT_DOCS_URL));
        t.ok(code, `${each.what}: refused with ${accepted.join(" or ")} (${body.slice(0, 300)})`);
        t.equal(result.status, ERROR_CATALOGUE[code ?? (accepted[0] as ErrorCode)].status, `${each.what}: the status of that code`);
      }
    }
  });
}
