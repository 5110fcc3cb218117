import t from "tap";
import type { VerificationEvent } from "../../src/domain/analytics/events.js";
import type { VerificationCode } from "../../src/domain/verification/codes.js";
import { MAX_ANALYTICS_QUERY_LENGTH } from "../../src/routes/v2/analytics/get-verifications.js";
import { analyticsDir, analyticsRows, asTally, event, tally } from "../helpers/analytics.js";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { ManualClock } from "../helpers/clock.js";
import { type Harness, harness, OTHER_ROOT_KEY, OTHER_WORKSPACE, STORAGE_KINDS, WORKSPACE } from "../helpers/harness.js";

/** The example query of docs/decisions.md#analytics. */
const EXAMPLE_QUERY =
  "SELECT external_id, SUM(count) AS total, sumIf(count, outcome = 'VALID') AS valid FROM key_verifications_per_day_v1 WHERE time >= now() - INTERVAL 7 DAY GROUP BY external_id ORDER BY total DESC LIMIT 10";

const NOW = Date.now();
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

// One embedded engine directory for this file: chDB binds one directory per process, and every app below shares it.
const dir = analyticsDir(t);
const analytics = (query: Record<string, number> = {}, extra: Record<string, unknown> = {}) => ({
  analytics: { engine: "embedded", path: dir, query: { maxExecutionMs: 5_000, maxResultRows: 100, ...query }, ...extra },
});

const h = await harness(t, { config: analytics() });
const apiA = (await h.call("apis.createApi", { name: "alpha" })).body.data.apiId as string;
const apiB = (await h.call("apis.createApi", { name: "beta" })).body.data.apiId as string;
const apiC = (await h.call("apis.createApi", { name: "gamma" }, { rootKey: OTHER_ROOT_KEY })).body.data.apiId as string;
const ksA = (await h.app.stores.apis.get(WORKSPACE, apiA))?.keySpaceId as string;
const ksB = (await h.app.stores.apis.get(WORKSPACE, apiB))?.keySpaceId as string;
const ksC = (await h.app.stores.apis.get(OTHER_WORKSPACE, apiC))?.keySpaceId as string;

// What verification would have recorded. API A's rows carry ordinary values; API B's and the other workspace's
// carry markers that must never show up where they are not allowed.
const A_OUTCOMES: [VerificationCode, number][] = [
  ["VALID", 12],
  ["RATE_LIMITED", 5],
  ["USAGE_EXCEEDED", 3],
  ["INSUFFICIENT_PERMISSIONS", 2],
  ["EXPIRED", 1],
  ["DISABLED", 1],
  ["FORBIDDEN", 1],
];
const recorded: VerificationEvent[] = [];
let i = 0;
for (const [outcome, count] of A_OUTCOMES) {
  for (let n = 0; n < count; n++, i++) {
    recorded.push(
      event({
        workspaceId: WORKSPACE,
        keySpaceId: ksA,
        keyId: `key_a${i % 3}`,
        externalId: `user_${i % 4}`,
        outcome,
        time: NOW - i * 37 * 60_000,
        spentCredits: outcome === "VALID" ? 2 : 0,
        latencyMs: 1 + (i % 5),
        tags: ["path=/v1/orders"],
      }),
    );
  }
}
for (let n = 0; n < 4; n++)
  recorded.push(event({ workspaceId: WORKSPACE, keySpaceId: "", keyId: "", outcome: "NOT_FOUND", time: NOW - n * HOUR }));
for (let n = 0; n < 8; n++) {
  recorded.push(
    event({
      workspaceId: WORKSPACE,
      keySpaceId: ksB,
      keyId: "key_zzapib",
      externalId: "zz_apib_user",
      outcome: n < 6 ? "VALID" : "RATE_LIMITED",
      tags: ["zz_apib_tag"],
      time: NOW - n * 5 * HOUR,
    }),
  );
}
for (let n = 0; n < 20; n++) {
  recorded.push(
    event({
      requestId: `req_zzsecret${n}`,
      workspaceId: OTHER_WORKSPACE,
      keySpaceId: ksC,
      keyId: "key_zzsecret",
      identityId: "id_zzsecret",
      externalId: "zz_secret_external",
      tags: ["zz_secret_tag"],
      time: NOW - n * HOUR,
    }),
  );
}
// Older than the raw table's 90 days, younger than the day table's 365.
const old = event({ workspaceId: WORKSPACE, keySpaceId: ksA, externalId: "user_old", time: NOW - 120 * DAY });
recorded.push(old);
for (const e of recorded) h.app.services.analytics.sinks.verifications.record(e);
await h.app.analytics.flush();

const ours = recorded.filter((e) => e.workspaceId === WORKSPACE);
const within = (days: number) => (e: VerificationEvent) => e.time >= NOW - days * DAY;

const rows = (query: string, rootKey?: string, on: Harness = h) => analyticsRows(on, "analytics.getVerifications", query, rootKey);

t.test("the example query works as written: rows of exactly the selected fields, numbers as JSON numbers", async (t) => {
  const result = await h.call("analytics.getVerifications", { query: EXAMPLE_QUERY });
  t.equal(result.status, 200);
  t.same(Object.keys(result.body), ["meta", "data"]);
  const data: Record<string, unknown>[] = result.body.data;
  for (const row of data) {
    t.same(Object.keys(row), ["external_id", "total", "valid"], "exactly the selected fields, in order");
    t.equal(typeof row.total, "number");
    t.equal(typeof row.valid, "number");
  }
  const lastWeek = ours.filter(within(7));
  t.same(
    asTally(data, "external_id", "total"),
    tally(lastWeek, (e) => e.externalId),
    "totals per external id match what was recorded",
  );
  const valid = tally(
    lastWeek.filter((e) => e.outcome === "VALID"),
    (e) => e.externalId,
  );
  t.same(
    asTally(data, "external_id", "valid"),
    Object.fromEntries(data.map((row) => [row.external_id, valid[row.external_id as string] ?? 0])),
    "and the VALID ones",
  );
  const totals = data.map((row) => row.total as number);
  t.same(
    totals,
    [...totals].sort((a, b) => b - a),
    "ordered by total, descending",
  );
});

t.test("counts per outcome match the verifications recorded, in the raw table and in every aggregate", async (t) => {
  const expected = (days: number) => tally(ours.filter(within(days)), (e) => e.outcome);
  t.same(
    asTally(await rows("SELECT outcome, count() AS n FROM key_verifications_v1 GROUP BY outcome"), "outcome", "n"),
    expected(90),
    "raw",
  );
  for (const [table, days] of [
    ["key_verifications_per_minute_v1", 90],
    ["key_verifications_per_hour_v1", 90],
    ["key_verifications_per_day_v1", 365],
    ["key_verifications_per_month_v1", 1095],
  ] as const) {
    t.same(asTally(await rows(`SELECT outcome, SUM(count) AS n FROM ${table} GROUP BY outcome`), "outcome", "n"), expected(days), table);
  }
  const [sums] = await rows(
    "SELECT sum(spent_credits) AS credits, round(avgMerge(latency_avg), 6) AS latency FROM key_verifications_per_hour_v1",
  );
  const hourly = ours.filter(within(90));
  t.equal(
    sums?.credits,
    hourly.reduce((sum, e) => sum + e.spentCredits, 0),
    "spent credits add up",
  );
  t.equal(
    sums?.latency,
    Math.round((hourly.reduce((sum, e) => sum + e.latencyMs, 0) / hourly.length) * 1e6) / 1e6,
    "average latency from the aggregate states",
  );
});

t.test("a wildcard key sees every API of its workspace and nothing of another workspace", async (t) => {
  const spaces = (await rows("SELECT DISTINCT key_space_id FROM key_verifications_v1 ORDER BY key_space_id")).map(
    (row) => row.key_space_id,
  );
  t.same(spaces, ["", ksA, ksB].sort());
  t.same(await rows("SELECT DISTINCT workspace_id FROM key_verifications_v1"), [{ workspace_id: WORKSPACE }]);
  const wildcard = await h.rootKey(["api.*.read_analytics"]);
  t.same(
    asTally(await rows("SELECT key_space_id, count() AS n FROM key_verifications_v1 GROUP BY key_space_id", wildcard), "key_space_id", "n"),
    tally(ours.filter(within(90)), (e) => e.keySpaceId),
  );
});

t.test("a per-API key sees only the rows of its APIs", async (t) => {
  const onlyA = await h.rootKey([`api.${apiA}.read_analytics`]);
  t.same(
    asTally(await rows("SELECT key_space_id, count() AS n FROM key_verifications_v1 GROUP BY key_space_id", onlyA), "key_space_id", "n"),
    { [ksA]: ours.filter((e) => e.keySpaceId === ksA && within(90)(e)).length },
  );
  t.same(await rows("SELECT count() AS n FROM key_verifications_per_day_v1 WHERE external_id = 'zz_apib_user'", onlyA), [{ n: 0 }]);
  const both = await h.rootKey([`api.${apiA}.read_analytics`, `apis.${apiB}.read_analytics`]);
  t.same(
    (await rows("SELECT DISTINCT key_space_id AS ks FROM key_verifications_per_hour_v1 ORDER BY ks", both)).map((row) => row.ks),
    [ksA, ksB].sort(),
  );
  const wildcardActions = await h.rootKey([`api.${apiB}.*`]);
  t.same(
    (await rows("SELECT DISTINCT key_space_id AS ks FROM key_verifications_per_hour_v1", wildcardActions)).map((row) => row.ks),
    [ksB],
    "api.<id>.* grants it too",
  );
});

t.test("the other workspace sees its own rows only", async (t) => {
  t.same(await rows("SELECT DISTINCT external_id, workspace_id FROM key_verifications_v1", OTHER_ROOT_KEY), [
    { external_id: "zz_secret_external", workspace_id: OTHER_WORKSPACE },
  ]);
});

t.test("read_analytics is its own permission: read_api is not enough", async (t) => {
  const readApi = await h.rootKey(["api.*.read_api", `api.${apiA}.read_api`]);
  assertError(
    t,
    await h.call("analytics.getVerifications", { query: EXAMPLE_QUERY }, { rootKey: readApi }),
    "err:unkey:authorization:insufficient_permissions",
    /api\.\*\.read_analytics/,
  );
});

await checkUnauthenticated(t, h, "analytics.getVerifications", { query: EXAMPLE_QUERY });
await checkPermissions(t, h, "analytics.getVerifications", () => ({ query: EXAMPLE_QUERY }), {
  missing: ["api.*.read_analytics", "api.<apiId>.read_analytics"],
  accepted: [["api.*.read_analytics"], [`api.${apiA}.read_analytics`], ["api.*"], ["*"]],
});

t.test("a key space named in the query must exist here (404) and be readable by the key (403)", async (t) => {
  const onlyA = await h.rootKey([`api.${apiA}.read_analytics`]);
  t.same(await rows(`SELECT count() AS n FROM key_verifications_v1 WHERE key_space_id = '${ksA}'`, onlyA), [
    { n: ours.filter((e) => e.keySpaceId === ksA && within(90)(e)).length },
  ]);
  assertError(
    t,
    await h.call(
      "analytics.getVerifications",
      { query: `SELECT * FROM key_verifications_v1 WHERE key_space_id = '${ksB}'` },
      { rootKey: onlyA },
    ),
    "err:unkey:authorization:insufficient_permissions",
    new RegExp(apiB),
  );
  assertError(
    t,
    await h.call(
      "analytics.getVerifications",
      { query: `SELECT * FROM key_verifications_v1 WHERE key_space_id IN ('${ksA}', '${ksB}')` },
      { rootKey: onlyA },
    ),
    "err:unkey:authorization:insufficient_permissions",
  );
  assertError(
    t,
    await h.call("analytics.getVerifications", { query: "SELECT * FROM key_verifications_v1 WHERE key_space_id = 'ks_doesnotexist'" }),
    "err:unkey:data:key_space_not_found",
    /ks_doesnotexist/,
  );
  assertError(
    t,
    await h.call("analytics.getVerifications", { query: `SELECT * FROM key_verifications_v1 WHERE key_space_id = '${ksC}'` }),
    "err:unkey:data:key_space_not_found",
    new RegExp(ksC),
  );
});

t.test("rows older than a table's retention are not visible, and asking for them is 400", async (t) => {
  t.same(await rows("SELECT count() AS n FROM key_verifications_v1 WHERE external_id = 'user_old'"), [{ n: 0 }], "raw keeps 90 days");
  t.same(
    await rows("SELECT count() AS n FROM key_verifications_per_hour_v1 WHERE external_id = 'user_old'"),
    [{ n: 0 }],
    "per hour keeps 90 days",
  );
  t.same(
    await rows("SELECT SUM(count) AS n FROM key_verifications_per_day_v1 WHERE external_id = 'user_old'"),
    [{ n: 1 }],
    "per day keeps 365 days",
  );
  for (const query of [
    "SELECT count() FROM key_verifications_v1 WHERE time >= toUnixTimestamp64Milli(now64() - INTERVAL 200 DAY)",
    "SELECT count() FROM key_verifications_per_hour_v1 WHERE time > now() - INTERVAL 100 DAY",
    "SELECT SUM(count) FROM key_verifications_per_day_v1 WHERE time BETWEEN today() - 400 AND today()",
    "SELECT SUM(count) FROM key_verifications_per_day_v1 WHERE toDate('2020-01-01') <= time",
  ]) {
    assertError(
      t,
      await h.call("analytics.getVerifications", { query }),
      "err:user:bad_request:query_range_exceeds_retention",
      /keeps \d+ days/,
    );
  }
  t.equal(
    (await h.call("analytics.getVerifications", { query: "SELECT count() FROM key_verifications_per_day_v1 WHERE time >= today() - 365" }))
      .status,
    200,
    "a bound at the retention edge is fine",
  );
});

t.test("the body is validated: query is a non-empty string of at most MAX_ANALYTICS_QUERY_LENGTH characters", async (t) => {
  assertInvalidAt(t, await h.call("analytics.getVerifications", {}), "body.query", "is required");
  assertInvalidAt(t, await h.call("analytics.getVerifications", { query: "" }), "body.query", "must be at least 1 character long");
  assertInvalidAt(
    t,
    await h.call("analytics.getVerifications", { query: `SELECT 1 ${" ".repeat(MAX_ANALYTICS_QUERY_LENGTH)}` }),
    "body.query",
    `must be at most ${MAX_ANALYTICS_QUERY_LENGTH} characters long`,
  );
  assertInvalidAt(t, await h.call("analytics.getVerifications", { query: 42 }), "body.query", "must be a string");
  assertInvalidAt(
    t,
    await h.call("analytics.getVerifications", { query: EXAMPLE_QUERY, apiId: apiA }),
    "body.apiId",
    "is not a known field",
  );
});

t.test("engine errors come back as 400s in plain words, without keygate's own settings", async (t) => {
  const unknownColumn = await h.call("analytics.getVerifications", { query: "SELECT no_such_column FROM key_verifications_v1" });
  assertError(t, unknownColumn, "err:user:bad_request:invalid_analytics_query", /no_such_column/);
  t.notMatch(unknownColumn.body.error.detail, /additional_table_filters|SETTINGS|keygate\./);
  assertError(
    t,
    await h.call("analytics.getVerifications", { query: "SELECT * FROM verifications" }),
    "err:user:bad_request:invalid_analytics_table",
    /key_verifications_v1/,
  );
  assertError(
    t,
    await h.call("analytics.getVerifications", { query: "SELEC 1" }),
    "err:user:bad_request:invalid_analytics_query",
    /Syntax error/,
  );
  assertError(
    t,
    await h.call("analytics.getVerifications", { query: "-- nothing but a comment" }),
    "err:user:bad_request:invalid_analytics_query",
  );
  assertError(
    t,
    await h.call("analytics.getVerifications", { query: "SELECT toDate('not a date')" }),
    "err:user:bad_request:invalid_analytics_query",
  );
});

t.test("64-bit integers, floats and dates come back as JSON numbers and strings", async (t) => {
  const [row] = await rows(
    "SELECT toInt64(9007199254740991) AS u, toInt64(-3) AS i, 1.5 AS f, count() AS c, toDate('2026-01-02') AS d, [1, 2] AS a FROM key_verifications_v1",
  );
  t.same(row, { u: 9007199254740991, i: -3, f: 1.5, c: ours.filter(within(90)).length, d: "2026-01-02", a: [1, 2] });
});

t.test("queries CTEs, subqueries, UNION, JOIN and ARRAY JOIN like ClickHouse does", async (t) => {
  const perKey = await rows(
    "WITH hourly AS (SELECT key_id, SUM(count) AS n FROM key_verifications_per_hour_v1 GROUP BY key_id) SELECT key_id, n FROM hourly WHERE key_id IN (SELECT key_id FROM key_verifications_v1 WHERE outcome = 'VALID') ORDER BY key_id",
  );
  const valid = new Set(ours.filter((e) => within(90)(e) && e.outcome === "VALID").map((e) => e.keyId));
  t.same(
    perKey.map((row) => row.key_id),
    [...valid].sort(),
  );
  const union = await rows(
    "SELECT 'raw' AS source, count() AS n FROM key_verifications_v1 UNION ALL SELECT 'day' AS source, SUM(count) AS n FROM key_verifications_per_day_v1",
  );
  t.same(asTally(union, "source", "n"), { raw: ours.filter(within(90)).length, day: ours.length });
  const tags = await rows("SELECT tag, count() AS n FROM key_verifications_v1 ARRAY JOIN tags AS tag GROUP BY tag ORDER BY tag");
  t.same(
    asTally(tags, "tag", "n"),
    tally(
      ours.filter(within(90)).flatMap((e) => e.tags.map((tag) => ({ ...e, tag }))),
      (e) => (e as VerificationEvent & { tag: string }).tag,
    ),
  );
  const joined = await rows(
    "SELECT count() AS n FROM key_verifications_v1 AS r JOIN key_verifications_v1 AS s ON r.request_id = s.request_id",
  );
  t.same(joined, [{ n: ours.filter(within(90)).length }]);
});

t.test("LIMIT is clamped to query.maxResultRows, and a UNION beyond it is 422", async (t) => {
  const volume = await h.rootKey(["*"], "ws_volume");
  for (let n = 0; n < 150; n++)
    h.app.services.analytics.sinks.verifications.record(event({ workspaceId: "ws_volume", time: NOW - n * 60_000 }));
  await h.app.analytics.flush();
  t.equal((await rows("SELECT request_id FROM key_verifications_v1", volume)).length, 100, "no LIMIT: 100 rows");
  t.equal((await rows("SELECT request_id FROM key_verifications_v1 LIMIT 100000000", volume)).length, 100, "a larger LIMIT: 100 rows");
  t.equal((await rows("SELECT request_id FROM key_verifications_v1 LIMIT 5", volume)).length, 5, "a smaller LIMIT is kept");
  assertError(
    t,
    await h.call(
      "analytics.getVerifications",
      { query: "SELECT request_id FROM key_verifications_v1 UNION ALL SELECT request_id FROM key_verifications_v1" },
      { rootKey: volume },
    ),
    "err:user:unprocessable_entity:query_rows_limit_exceeded",
  );
});

t.test("time, memory and rows read are bounded by the engine: 422", async (t) => {
  for (let n = 0; n < 300; n++)
    h.app.services.analytics.sinks.verifications.record(event({ workspaceId: "ws_heavy", time: NOW - n * 60_000 }));
  await h.app.analytics.flush();
  const slow = await harness(t, { config: analytics({ maxExecutionMs: 300 }) });
  let heavy = await slow.rootKey(["*"], "ws_heavy");
  const crossJoin =
    "SELECT count() FROM key_verifications_v1 a, key_verifications_v1 b, key_verifications_v1 c, key_verifications_v1 d, key_verifications_v1 e";
  assertError(
    t,
    await slow.call("analytics.getVerifications", { query: crossJoin }, { rootKey: heavy }),
    "err:user:unprocessable_entity:query_execution_timeout",
    /300 ms/,
  );

  const small = await harness(t, { config: analytics({ maxExecutionMs: 30_000, maxMemoryBytes: 5_000_000 }) });
  heavy = await small.rootKey(["*"], "ws_heavy");
  const hungry =
    "SELECT uniqExact(concat(a.request_id, b.request_id, c.request_id)) FROM key_verifications_v1 a, key_verifications_v1 b, key_verifications_v1 c";
  assertError(
    t,
    await small.call("analytics.getVerifications", { query: hungry }, { rootKey: heavy }),
    "err:user:unprocessable_entity:query_memory_limit_exceeded",
  );

  const narrow = await harness(t, { config: analytics({ maxRowsToRead: 10 }) });
  heavy = await narrow.rootKey(["*"], "ws_heavy");
  assertError(
    t,
    await narrow.call(
      "analytics.getVerifications",
      { query: "SELECT count() FROM key_verifications_v1 WHERE outcome != ''" },
      { rootKey: heavy },
    ),
    "err:user:unprocessable_entity:query_rows_limit_exceeded",
  );
});

for (const storage of STORAGE_KINDS) {
  t.test(`the per-workspace query quota answers 429 with Retry-After (${storage} stores)`, async (t) => {
    // Frozen at the real time: were the quota's fixed window to roll over before the fourth query, it would pass.
    const limited = await harness(t, {
      storage,
      clock: new ManualClock(Date.now()),
      config: analytics({}, { quota: { queries: 3, windowMs: 60_000, executionMs: 60_000 } }),
    });
    for (let n = 0; n < 3; n++) t.equal((await limited.call("analytics.getVerifications", { query: "SELECT 1 AS one" })).status, 200);
    const refused = await limited.call("analytics.getVerifications", { query: "SELECT 1 AS one" });
    assertError(t, refused, "err:user:too_many_requests:query_quota_exceeded", /3 queries/);
    t.match(refused.headers["content-type"], /^application\/problem\+json/);
    t.match(refused.headers["retry-after"], /^\d+$/);
    t.ok(Number(refused.headers["retry-after"]) <= 60);
    t.equal(
      (await limited.call("analytics.getVerifications", { query: "SELECT 1 AS one" }, { rootKey: OTHER_ROOT_KEY })).status,
      200,
      "another workspace has its own quota",
    );
  });
}

t.test("with analytics off, getVerifications answers 412 and the sink drops events, counted", async (t) => {
  const off = await harness(t);
  assertError(t, await off.call("analytics.getVerifications", { query: EXAMPLE_QUERY }), "err:unkey:data:analytics_not_configured", /off/);
  off.app.services.analytics.sinks.verifications.record(event());
  t.match(off.app.analytics.stats(), { recorded: 1, written: 0, dropped: { disabled: 1 } });
  t.match((await off.app.inject("/metrics")).body, /keygate_analytics_events_dropped_total\{reason="analytics_off"\} 1/);
});

t.test("closing the app writes the events still buffered", async (t) => {
  const writer = await harness(t, { config: analytics({}, { buffer: { flushIntervalMs: 600_000, batchSize: 1_000, maxEvents: 10_000 } }) });
  for (let n = 0; n < 7; n++) writer.app.services.analytics.sinks.verifications.record(event({ workspaceId: "ws_flush" }));
  t.equal(writer.app.analytics.stats().written, 0, "nothing written yet");
  await writer.app.close();
  t.equal(writer.app.analytics.stats().written, 7);
  t.same(await rows("SELECT count() AS n FROM key_verifications_v1", await h.rootKey(["*"], "ws_flush")), [{ n: 7 }]);
});

t.test("GET /metrics shows what the pipeline recorded, wrote and dropped", async (t) => {
  const body = (await h.app.inject("/metrics")).body;
  const stats = h.app.analytics.stats();
  t.ok(stats.recorded >= recorded.length);
  t.match(body, new RegExp(`keygate_analytics_events_recorded_total ${stats.recorded}\\n`));
  t.match(body, new RegExp(`keygate_analytics_events_written_total ${stats.written}\\n`));
  t.match(body, /keygate_analytics_events_dropped_total\{reason="buffer_full"\} 0/);
});

t.test("a failed query never makes a later request see an earlier result", async (t) => {
  // chDB 3.4 was seen returning a connection's previous result after a failure; each request has its own connection.
  const volume = await h.rootKey(["*"], "ws_volume");
  for (let round = 0; round < 20; round++) {
    t.equal((await rows("SELECT request_id FROM key_verifications_v1 LIMIT 5", volume)).length, 5);
    const failed = await h.call(
      "analytics.getVerifications",
      { query: "SELECT request_id FROM key_verifications_v1 UNION ALL SELECT request_id FROM key_verifications_v1" },
      { rootKey: volume },
    );
    t.equal(failed.status, 422);
    t.same(await rows("SELECT count() AS n FROM key_verifications_v1", volume), [{ n: 150 }], `round ${round}`);
  }
});

t.test("a time bound beyond what a date can hold is a 400, not a failure", async (t) => {
  assertError(
    t,
    await h.call("analytics.getVerifications", { query: "SELECT count() FROM key_verifications_v1 WHERE time >= -9223372036854775807" }),
    "err:user:bad_request:query_range_exceeds_retention",
    /distant past/,
  );
});
