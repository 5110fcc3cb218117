import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import type { ErrorCode } from "../../src/errors/catalogue.js";
import { DEFAULT_DOCS_URL, ERROR_CATALOGUE, errorTypeUrl } from "../../src/errors/catalogue.js";
import { analyticsDir, event } from "../helpers/analytics.js";
import { harness, OTHER_ROOT_KEY, OTHER_WORKSPACE, WORKSPACE } from "../helpers/harness.js";

/**
 * Queries written to get at rows, tables, files, URLs or settings they must not reach, or to write, or to exhaust
 * the engine. Each is refused with the expected error or answered confined to the caller's rows; and no answer,
 * refusal or error message ever carries a value of another workspace (or, for a per-API key, of another API).
 */

const h = await harness(t, {
  config: {
    analytics: {
      engine: "embedded",
      path: analyticsDir(t),
      query: { maxExecutionMs: 1_500, maxMemoryBytes: 100_000_000, maxResultRows: 100 },
    },
  },
});
const apiA = (await h.call("apis.createApi", { name: "alpha" })).body.data.apiId as string;
const apiB = (await h.call("apis.createApi", { name: "beta" })).body.data.apiId as string;
const apiC = (await h.call("apis.createApi", { name: "gamma" }, { rootKey: OTHER_ROOT_KEY })).body.data.apiId as string;
const ks = {
  A: (await h.app.stores.apis.get(WORKSPACE, apiA))?.keySpaceId as string,
  B: (await h.app.stores.apis.get(WORKSPACE, apiB))?.keySpaceId as string,
  C: (await h.app.stores.apis.get(OTHER_WORKSPACE, apiC))?.keySpaceId as string,
};
const now = Date.now();
for (let n = 0; n < 200; n++)
  h.app.services.analytics.sinks.verifications.record(
    event({ requestId: `req_a${n}`, keySpaceId: ks.A, externalId: `user_${n % 7}`, time: now - n * 60_000 }),
  );
for (let n = 0; n < 10; n++)
  h.app.services.analytics.sinks.verifications.record(
    event({ requestId: `req_zzapib${n}`, keySpaceId: ks.B, externalId: "zz_apib_user", tags: ["zz_apib_tag"], time: now - n * 60_000 }),
  );
for (let n = 0; n < 20; n++) {
  h.app.services.analytics.sinks.verifications.record(
    event({
      requestId: `req_zzsecret${n}`,
      workspaceId: OTHER_WORKSPACE,
      keySpaceId: ks.C,
      keyId: "key_zzsecret",
      identityId: "id_zzsecret",
      externalId: "zz_secret_external",
      tags: ["zz_secret_tag"],
      time: now - n * 60_000,
    }),
  );
}
await h.app.analytics.flush();
const perApiKey = await h.rootKey([`api.${apiA}.read_analytics`]);

type Expectation = ErrorCode | "confined";
interface Hostile {
  what: string;
  sql: string;
  /** The answer: confined, or refused with this code (or with any of these, where the machine decides which limit trips first). */
  expect: Expectation | readonly ErrorCode[];
  /** Runs with a key that may read API A only. */
  perApi?: boolean;
  /** Further checks of a confined answer. */
  rows?: (rows: Record<string, unknown>[]) => boolean;
}

const BAD_TABLE = "err:user:bad_request:invalid_analytics_table";
const BAD_FUNCTION = "err:user:bad_request:invalid_analytics_function";
const BAD_QUERY = "err:user:bad_request:invalid_analytics_query";
const NOT_SELECT = "err:user:bad_request:invalid_analytics_query_type";
const OUTFILE = join(tmpdir(), `keygate-leak-${process.pid}.tsv`);
const onlyOurs = (rows: Record<string, unknown>[]) => rows.every((row) => !Object.values(row).includes(OTHER_WORKSPACE));

const HOSTILE: Hostile[] = [
  // other workspaces' rows, by every route
  {
    what: "asking for the other workspace by name",
    sql: "SELECT * FROM key_verifications_v1 WHERE workspace_id = 'ws_other'",
    expect: "confined",
    rows: (r) => r.length === 0,
  },
  {
    what: "everything that is not ours",
    sql: "SELECT count() AS n FROM key_verifications_v1 WHERE workspace_id != 'ws_test'",
    expect: "confined",
    rows: (r) => r[0]?.n === 0,
  },
  {
    what: "an OR that is always true",
    sql: "SELECT DISTINCT workspace_id FROM key_verifications_v1 WHERE 1 = 1 OR workspace_id = 'ws_other'",
    expect: "confined",
    rows: (r) => r.length === 1 && r[0]?.workspace_id === WORKSPACE,
  },
  {
    what: "PREWHERE instead of WHERE",
    sql: "SELECT * FROM key_verifications_v1 PREWHERE workspace_id = 'ws_other'",
    expect: "confined",
    rows: (r) => r.length === 0,
  },
  { what: "FINAL", sql: "SELECT * FROM key_verifications_v1 FINAL WHERE workspace_id = 'ws_other'", expect: BAD_QUERY },
  {
    what: "a subquery",
    sql: "SELECT external_id FROM (SELECT * FROM key_verifications_v1) WHERE workspace_id = 'ws_other'",
    expect: "confined",
    rows: (r) => r.length === 0,
  },
  {
    what: "a CTE",
    sql: "WITH others AS (SELECT * FROM key_verifications_v1 WHERE workspace_id = 'ws_other') SELECT external_id FROM others",
    expect: "confined",
    rows: (r) => r.length === 0,
  },
  {
    what: "a UNION branch",
    sql: "SELECT external_id FROM key_verifications_v1 WHERE 0 UNION ALL SELECT external_id FROM key_verifications_per_hour_v1 WHERE workspace_id = 'ws_other'",
    expect: "confined",
    rows: (r) => r.length === 0,
  },
  {
    what: "a self-join across workspaces",
    sql: "SELECT * FROM key_verifications_v1 AS t1 JOIN key_verifications_v1 AS t2 ON t1.workspace_id != t2.workspace_id",
    expect: "confined",
    rows: (r) => r.length === 0,
  },
  {
    what: "a scalar subquery",
    sql: "SELECT (SELECT groupArray(external_id) FROM key_verifications_v1 WHERE workspace_id = 'ws_other') AS leaked",
    expect: "confined",
    rows: (r) => JSON.stringify(r) === '[{"leaked":[]}]',
  },
  {
    what: "a scalar subquery folded into an error message",
    sql: "SELECT toDate((SELECT any(external_id) FROM key_verifications_v1 WHERE workspace_id = 'ws_other')) AS d",
    expect: "confined",
  },
  {
    what: "an IN subquery",
    sql: "SELECT count() AS n FROM key_verifications_v1 WHERE workspace_id IN (SELECT workspace_id FROM key_verifications_v1 WHERE workspace_id = 'ws_other')",
    expect: "confined",
    rows: (r) => r[0]?.n === 0,
  },
  {
    what: "IN with a table name",
    sql: "SELECT count() FROM key_verifications_v1 WHERE workspace_id IN key_verifications_per_day_v1",
    expect: BAD_QUERY,
  },
  {
    what: "every aggregate table's workspaces",
    sql: "SELECT groupUniqArray(workspace_id) AS ws FROM key_verifications_per_month_v1",
    expect: "confined",
    rows: (r) => JSON.stringify(r) === `[{"ws":["${WORKSPACE}"]}]`,
  },
  {
    what: "another workspace's key space",
    sql: `SELECT * FROM key_verifications_v1 WHERE key_space_id = '${ks.C}'`,
    expect: "err:unkey:data:key_space_not_found",
  },
  { what: "the physical database name", sql: "SELECT * FROM keygate.key_verifications_v1", expect: BAD_TABLE },
  { what: "a materialized view", sql: "SELECT * FROM key_verifications_per_day_mv_v1", expect: BAD_TABLE },
  {
    what: "a CTE name that is a view name in an outer scope",
    sql: "SELECT * FROM (WITH key_verifications_per_day_mv_v1 AS (SELECT 1 AS x) SELECT x FROM key_verifications_per_day_mv_v1) AS a, key_verifications_per_day_mv_v1 AS b",
    expect: BAD_TABLE,
  },
  {
    what: "a look-alike quote",
    sql: "SELECT external_id FROM key_verifications_v1 WHERE workspace_id = \u2018ws_other\u2019",
    expect: "confined",
    rows: (r) => r.length === 0,
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
    "view(SELECT * FROM key_verifications_v1)",
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
  { what: "joinGet", sql: "SELECT joinGet('keygate.key_verifications_v1', 'external_id', 'x')", expect: BAD_FUNCTION },
  {
    what: "a huge range",
    sql: "SELECT count() AS n FROM key_verifications_v1 WHERE arrayJoin(range(100000000)) > 0",
    expect: BAD_FUNCTION,
  },
  // SETTINGS overrides
  { what: "clearing the row filters", sql: "SELECT * FROM key_verifications_v1 SETTINGS additional_table_filters = {}", expect: BAD_QUERY },
  {
    what: "replacing the row filters",
    sql: "SELECT * FROM key_verifications_v1 WHERE workspace_id = 'ws_other' SETTINGS additional_table_filters = {'keygate.key_verifications_v1':'1'}",
    expect: BAD_QUERY,
  },
  {
    what: "leaving read-only mode in a subquery",
    sql: "SELECT * FROM (SELECT * FROM key_verifications_v1 SETTINGS readonly = 0)",
    expect: BAD_QUERY,
  },
  { what: "SET", sql: "SET additional_table_filters = ''", expect: NOT_SELECT },
  { what: "FORMAT", sql: "SELECT 1 FORMAT JSON", expect: BAD_QUERY },
  // writes and other statements
  { what: "INSERT", sql: "INSERT INTO key_verifications_v1 (workspace_id, external_id) VALUES ('ws_other', 'x')", expect: NOT_SELECT },
  { what: "INSERT SELECT", sql: "INSERT INTO key_verifications_v1 SELECT * FROM key_verifications_v1", expect: NOT_SELECT },
  { what: "ALTER DELETE", sql: "ALTER TABLE key_verifications_v1 DELETE WHERE 1", expect: NOT_SELECT },
  { what: "DROP", sql: "DROP TABLE key_verifications_v1", expect: NOT_SELECT },
  { what: "TRUNCATE", sql: "TRUNCATE TABLE key_verifications_v1", expect: NOT_SELECT },
  { what: "CREATE", sql: "CREATE TABLE x (a Int8) ENGINE = Memory", expect: NOT_SELECT },
  { what: "CREATE VIEW", sql: "CREATE VIEW v AS SELECT * FROM key_verifications_v1", expect: NOT_SELECT },
  { what: "OPTIMIZE", sql: "OPTIMIZE TABLE key_verifications_v1 FINAL", expect: NOT_SELECT },
  { what: "SYSTEM", sql: "SYSTEM SHUTDOWN", expect: NOT_SELECT },
  { what: "USE", sql: "USE system", expect: NOT_SELECT },
  { what: "GRANT", sql: "GRANT ALL ON *.* TO default", expect: NOT_SELECT },
  { what: "EXPLAIN", sql: "EXPLAIN SELECT * FROM key_verifications_v1", expect: NOT_SELECT },
  { what: "SHOW", sql: "SHOW TABLES", expect: NOT_SELECT },
  { what: "DESCRIBE", sql: "DESCRIBE TABLE key_verifications_v1", expect: NOT_SELECT },
  { what: "INTO OUTFILE", sql: `SELECT * FROM key_verifications_v1 INTO OUTFILE '${OUTFILE}'`, expect: BAD_QUERY },
  // several statements
  { what: "a second statement that writes", sql: "SELECT 1; DROP TABLE key_verifications_v1", expect: BAD_QUERY },
  { what: "a second statement that reads", sql: "SELECT 1; SELECT * FROM system.tables", expect: BAD_QUERY },
  { what: "a NUL byte before a second statement", sql: "SELECT 1 AS a\u0000; DROP TABLE key_verifications_v1", expect: BAD_QUERY },
  // comments and quoting
  {
    what: "a line comment hiding a line break",
    sql: "SELECT external_id FROM key_verifications_v1 -- WHERE workspace_id = 'ws_test'\nWHERE workspace_id = 'ws_other'",
    expect: "confined",
    rows: (r) => r.length === 0,
  },
  { what: "an unterminated block comment", sql: "SELECT 1 /* unterminated", expect: BAD_QUERY },
  {
    what: "a comment before a UNION on a system table",
    sql: "SELECT 1 AS one -- \nUNION ALL SELECT count() FROM system.tables",
    expect: BAD_TABLE,
  },
  {
    what: "a backquoted public table",
    sql: "SELECT * FROM `key_verifications_v1` WHERE workspace_id = 'ws_other'",
    expect: "confined",
    rows: (r) => r.length === 0,
  },
  { what: "an identifier forging an EXPLAIN line", sql: "SELECT 'a' AS `x\n   TableIdentifier system.tables`", expect: BAD_QUERY },
  {
    what: "doubled quotes",
    sql: "SELECT external_id FROM key_verifications_v1 WHERE external_id = 'x'' OR ''1''=''1'",
    expect: "confined",
    rows: (r) => r.length === 0,
  },
  {
    what: "a backslash-escaped quote",
    sql: "SELECT external_id FROM key_verifications_v1 WHERE workspace_id = 'ws_test\\' OR 1=1 --'",
    expect: "confined",
    rows: (r) => r.length === 0,
  },
  { what: "a heredoc string holding SQL", sql: "SELECT $$ '; DROP TABLE key_verifications_v1; -- $$ AS s", expect: "confined" },
  { what: "APPLY", sql: "SELECT * EXCEPT (request_id) APPLY(toString) FROM key_verifications_v1", expect: BAD_QUERY },
  { what: "COLUMNS regexp", sql: "SELECT COLUMNS('.*') FROM key_verifications_v1", expect: BAD_QUERY },
  { what: "a query parameter", sql: "SELECT {p:String}", expect: BAD_QUERY },
  { what: "INTERSECT", sql: "SELECT 1 INTERSECT SELECT 1", expect: BAD_QUERY },
  // huge queries
  { what: "3000 nested parentheses", sql: `SELECT ${"(".repeat(3_000)}1${")".repeat(3_000)}`, expect: BAD_QUERY },
  {
    what: "300 ORs",
    sql: `SELECT count() AS n FROM key_verifications_v1 WHERE ${Array.from({ length: 300 }, (_, i) => `external_id = 'u${i}'`).join(" OR ")}`,
    expect: "confined",
  },
  { what: "a query longer than allowed", sql: `SELECT 1 ${"-".repeat(10_000)}`, expect: "err:unkey:application:invalid_input" },
  // exhausting time, memory and rows
  // Counting a five-way cross join needs little memory and far more than the time limit.
  {
    what: "a five-way cross join",
    sql: "SELECT count() FROM key_verifications_v1 a, key_verifications_v1 b, key_verifications_v1 c, key_verifications_v1 d, key_verifications_v1 e",
    expect: "err:user:unprocessable_entity:query_execution_timeout",
  },
  // Memory is what this query exhausts, but on a slow or busy machine the time limit may trip first: either refuses.
  {
    what: "a memory-hungry distinct count",
    sql: "SELECT uniqExact(concat(a.request_id, b.request_id, c.request_id, d.request_id)) FROM key_verifications_v1 a, key_verifications_v1 b, key_verifications_v1 c, key_verifications_v1 d",
    expect: ["err:user:unprocessable_entity:query_memory_limit_exceeded", "err:user:unprocessable_entity:query_execution_timeout"],
  },
  {
    what: "a LIMIT far beyond the clamp",
    sql: "SELECT request_id FROM key_verifications_v1 ORDER BY request_id LIMIT 100000000",
    expect: "confined",
    rows: (r) => r.length === 100,
  },
  {
    what: "a UNION past the row limit",
    sql: "SELECT request_id FROM key_verifications_v1 UNION ALL SELECT request_id FROM key_verifications_v1",
    expect: "err:user:unprocessable_entity:query_rows_limit_exceeded",
  },
  // a key for API A only
  {
    what: "per API: another API's key space",
    sql: `SELECT * FROM key_verifications_v1 WHERE key_space_id = '${ks.B}'`,
    expect: "err:unkey:authorization:insufficient_permissions",
    perApi: true,
  },
  {
    what: "per API: both key spaces",
    sql: `SELECT * FROM key_verifications_v1 WHERE key_space_id IN ('${ks.A}', '${ks.B}')`,
    expect: "err:unkey:authorization:insufficient_permissions",
    perApi: true,
  },
  {
    what: "per API: every key space",
    sql: "SELECT DISTINCT key_space_id AS k FROM key_verifications_v1",
    expect: "confined",
    perApi: true,
    rows: (r) => JSON.stringify(r) === `[{"k":"${ks.A}"}]`,
  },
  {
    what: "per API: all but its own",
    sql: `SELECT count() AS n FROM key_verifications_v1 WHERE key_space_id != '${ks.A}'`,
    expect: "confined",
    perApi: true,
    rows: (r) => r[0]?.n === 0,
  },
  {
    what: "per API: through a CTE of an aggregate",
    sql: "WITH x AS (SELECT * FROM key_verifications_per_hour_v1) SELECT DISTINCT key_space_id AS k FROM x",
    expect: "confined",
    perApi: true,
    rows: (r) => JSON.stringify(r) === `[{"k":"${ks.A}"}]`,
  },
  {
    what: "per API: the other API's external ids",
    sql: "SELECT count() AS n FROM key_verifications_per_day_v1 WHERE external_id = 'zz_apib_user'",
    expect: "confined",
    perApi: true,
    rows: (r) => r[0]?.n === 0,
  },
];

t.test(`${HOSTILE.length} hostile queries are each refused or confined, and none leaks a row`, async (t) => {
  t.ok(HOSTILE.length >= 40);
  for (const hostile of HOSTILE) {
    const result = await h.call("analytics.getVerifications", { query: hostile.sql }, hostile.perApi ? { rootKey: perApiKey } : {});
    const body = JSON.stringify(result.body);
    t.notMatch(body, /zz_?secret/i, `${hostile.what}: nothing of the other workspace`);
    if (hostile.perApi) t.notMatch(body, /zz_?apib/i, `${hostile.what}: nothing of the other API`);
    if (hostile.expect === "confined") {
      t.equal(result.status, 200, `${hostile.what}: answered, confined (${body.slice(0, 200)})`);
      if (result.status === 200) {
        t.ok(onlyOurs(result.body.data), `${hostile.what}: only our workspace`);
        if (hostile.rows)
          t.ok(hostile.rows(result.body.data), `${hostile.what}: the rows are ours (${JSON.stringify(result.body.data).slice(0, 200)})`);
      }
    } else {
      const accepted: readonly ErrorCode[] = typeof hostile.expect === "string" ? [hostile.expect] : hostile.expect;
      const code = accepted.find((candidate) => result.body?.error?.type === errorTypeUrl(candidate, DEFAULT_DOCS_URL));
      t.ok(code, `${hostile.what}: refused with ${accepted.join(" or ")} (${body.slice(0, 300)})`);
      t.equal(result.status, ERROR_CATALOGUE[code ?? (accepted[0] as ErrorCode)].status, `${hostile.what}: the status of that code`);
    }
  }
});

t.test("afterwards nothing was written, dropped or leaked to disk, and the engine still answers", async (t) => {
  t.same(
    (
      await h.call("analytics.getVerifications", {
        query: "SELECT key_space_id AS k, count() AS n FROM key_verifications_v1 GROUP BY k ORDER BY n DESC",
      })
    ).body.data,
    [
      { k: ks.A, n: 200 },
      { k: ks.B, n: 10 },
    ],
  );
  t.same(
    (await h.call("analytics.getVerifications", { query: "SELECT count() AS n FROM key_verifications_v1" }, { rootKey: OTHER_ROOT_KEY }))
      .body.data,
    [{ n: 20 }],
  );
  t.notOk(existsSync(OUTFILE), "INTO OUTFILE wrote nothing");
});
