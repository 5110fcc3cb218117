import t from "tap";
import type { RatelimitEvent } from "../../src/domain/analytics/events.js";
import { analyticsDir, analyticsRows, asTally, documentedQueries, ratelimitEvent, tally } from "../helpers/analytics.js";
import { assertError, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { ManualClock } from "../helpers/clock.js";
import { harness, OTHER_ROOT_KEY, OTHER_WORKSPACE, STORAGE_KINDS, WORKSPACE } from "../helpers/harness.js";

const NOW = Date.now();
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const dir = analyticsDir(t);
const analytics = (extra: Record<string, unknown> = {}) => ({
  analytics: { engine: "embedded", path: dir, query: { maxExecutionMs: 5_000, maxResultRows: 1_000 }, ...extra },
});
const h = await harness(t, { config: analytics() });

// Namespace ids as Unkey's docs write them; analytics takes a permission's id as it is, without looking it up.
const NS_A = "rlns_1234";
const NS_B = "rlns_zznsb";
const CUSTOMERS = ["customer_123", "customer_456", "customer_789", "customer_000"];

const recorded: RatelimitEvent[] = [];
for (let i = 0; i < 48; i++) {
  recorded.push(
    ratelimitEvent({
      namespaceId: NS_A,
      identifier: CUSTOMERS[i % 4] as string,
      passed: i % 3 !== 0,
      tokens: 1 + (i % 3),
      latencyMs: 1 + (i % 5) + 0.25,
      time: NOW - MINUTE - i * 7 * MINUTE,
      overrideId: i % 4 === 1 ? "ovr_456" : "",
    }),
  );
}
for (let n = 0; n < 4; n++)
  recorded.push(ratelimitEvent({ namespaceId: NS_A, identifier: "customer_123", tokens: 5, latencyMs: 9, time: NOW - (2 + n) * DAY }));
for (let n = 0; n < 6; n++)
  recorded.push(ratelimitEvent({ namespaceId: NS_B, identifier: "zz_nsb_user", passed: n < 4, latencyMs: 3, time: NOW - n * HOUR }));
for (let n = 0; n < 10; n++) {
  recorded.push(
    ratelimitEvent({
      requestId: `req_zzsecret${n}`,
      workspaceId: OTHER_WORKSPACE,
      namespaceId: "rlns_zzsecret",
      identifier: "zz_secret_identifier",
      time: NOW - n * HOUR,
    }),
  );
}
// Older than the raw table's 90 days, younger than the day table's 365.
recorded.push(ratelimitEvent({ namespaceId: NS_A, identifier: "customer_old", time: NOW - 120 * DAY }));
const exact = ratelimitEvent({
  requestId: "req_exact",
  namespaceId: NS_A,
  identifier: "customer_exact",
  passed: false,
  latencyMs: 2.5,
  overrideId: "ovr_exact",
  limit: 100,
  remaining: 0,
  resetAt: NOW + 30_000,
  tokens: 7,
  time: NOW - 3 * DAY,
});
recorded.push(exact);
for (const e of recorded) h.app.services.analytics.sinks.ratelimits.record(e);
await h.app.analytics.flush();

const ours = recorded.filter((e) => e.workspaceId === WORKSPACE);
const within = (ms: number) => (e: RatelimitEvent) => e.time >= NOW - ms;
const inA = (e: RatelimitEvent) => e.namespaceId === NS_A;
const rows = (query: string, rootKey?: string) => analyticsRows(h, "analytics.getRatelimits", query, rootKey);
const mean = (values: number[]) => values.reduce((sum, v) => sum + v, 0) / values.length;
const round6 = (value: number) => Math.round(value * 1e6) / 1e6;
const TOTALS = {
  n: () => 1,
  p: (e: RatelimitEvent) => (e.passed ? 1 : 0),
  tt: (e: RatelimitEvent) => e.tokens,
  pt: (e: RatelimitEvent) => (e.passed ? e.tokens : 0),
};

t.test("requests, passed, tokens and passed tokens per identifier, in the raw table and in every aggregate", async (t) => {
  const check = (answer: Record<string, unknown>[], events: RatelimitEvent[], what: string) => {
    for (const [column, weight] of Object.entries(TOTALS))
      t.same(
        asTally(answer, "identifier", column),
        tally(events, (e) => e.identifier, weight),
        `${what}: ${column}`,
      );
  };
  check(
    await rows(
      "SELECT identifier, count() AS n, countIf(passed) AS p, sum(tokens) AS tt, sumIf(tokens, passed) AS pt FROM ratelimits_v1 GROUP BY identifier",
    ),
    ours.filter(within(90 * DAY)),
    "raw",
  );
  for (const [table, days] of [
    ["ratelimits_per_minute_v1", 90],
    ["ratelimits_per_hour_v1", 90],
    ["ratelimits_per_day_v1", 365],
    ["ratelimits_per_month_v1", 1095],
  ] as const) {
    check(
      await rows(
        `SELECT identifier, sum(total) AS n, sum(passed) AS p, sum(total_tokens) AS tt, sum(passed_tokens) AS pt FROM ${table} GROUP BY identifier`,
      ),
      ours.filter(within(days * DAY)),
      table,
    );
  }
});

t.test("latency from the aggregate states: avgMerge and the t-digest quantiles", async (t) => {
  const latencies = ours.filter(within(90 * DAY)).map((e) => e.latencyMs);
  for (const table of ["ratelimits_per_minute_v1", "ratelimits_per_hour_v1"]) {
    const [row] = await rows(
      `SELECT round(avgMerge(latency_avg), 6) AS avg, quantilesTDigestMerge(0.75)(latency_p75)[1] AS p75, quantilesTDigestMerge(0.99)(latency_p99)[1] AS p99 FROM ${table}`,
    );
    t.equal(row?.avg, round6(mean(latencies)), `${table}: the average of every latency`);
    const [p75, p99] = [Number(row?.p75), Number(row?.p99)];
    const sorted = [...latencies].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.floor(q * (sorted.length - 1))] as number;
    t.ok(Math.abs(p75 - at(0.75)) <= 1, `${table}: p75 ${p75} near ${at(0.75)}`);
    t.ok(p99 >= p75 && p99 <= Math.max(...latencies), `${table}: p99 ${p99} between p75 and the slowest`);
  }
});

t.test("a row of the raw table holds what rate limiting decided", async (t) => {
  t.same(
    await rows(
      "SELECT request_id, time, workspace_id, namespace_id, identifier, passed, latency, override_id, `limit`, remaining, reset_at, tokens FROM ratelimits_v1 WHERE request_id = 'req_exact'",
    ),
    [
      {
        request_id: "req_exact",
        time: exact.time,
        workspace_id: WORKSPACE,
        namespace_id: NS_A,
        identifier: "customer_exact",
        passed: false,
        latency: 2.5,
        override_id: "ovr_exact",
        limit: 100,
        remaining: 0,
        reset_at: exact.resetAt,
        tokens: 7,
      },
    ],
  );
});

// Unkey's zero-filled series and daily totals (get-ratelimits.mdx). As written, ClickHouse refuses them: the alias
// passed_tokens is also a column's name, so sum(total_tokens) - sum(passed_tokens) sums a sum.
const SERIES = `SELECT
  time,
  sum(passed) AS passed_requests,
  sum(total) - sum(passed) AS blocked_requests,
  sum(total) AS total_requests,
  sum(passed_tokens) AS passed_tokens,
  sum(total_tokens) - sum(passed_tokens) AS blocked_tokens,
  sum(total_tokens) AS total_tokens
FROM ratelimits_per_minute_v1
WHERE namespace_id = '${NS_A}'
  AND time >= toStartOfMinute(now() - INTERVAL 6 HOUR)
  AND time < toStartOfMinute(now())
GROUP BY time
ORDER BY time WITH FILL
  FROM toStartOfMinute(now() - INTERVAL 6 HOUR)
  TO toStartOfMinute(now())
  STEP INTERVAL 1 MINUTE`;
const DAILY = `SELECT
  time,
  sum(passed) AS passed_requests,
  sum(total) - sum(passed) AS blocked_requests,
  sum(total) AS total_requests,
  sum(passed_tokens) AS passed_tokens,
  sum(total_tokens) - sum(passed_tokens) AS blocked_tokens,
  sum(total_tokens) AS total_tokens
FROM ratelimits_per_day_v1
WHERE namespace_id = '${NS_A}'
  AND identifier IN ('customer_123', 'customer_456', 'customer_789')
  AND time >= toStartOfDay(now() - INTERVAL 30 DAY)
GROUP BY time
ORDER BY time ASC`;
const ownNames = (sql: string) =>
  sql
    .replace("sum(passed_tokens) AS passed_tokens", "sum(passed_tokens) AS tokens_passed")
    .replace("sum(total_tokens) AS total_tokens", "sum(total_tokens) AS tokens_total");

t.test("Unkey's series examples are refused as written, as ClickHouse refuses them, with a 400 that says why", async (t) => {
  for (const query of [SERIES, DAILY]) {
    assertError(
      t,
      await h.call("analytics.getRatelimits", { query }),
      "err:user:bad_request:invalid_analytics_query",
      /inside another aggregate function/,
    );
  }
});

t.test("Unkey's example queries work as written (the series with sums named apart from their columns)", async (t) => {
  const recentA = ours.filter((e) => inA(e) && within(6 * HOUR)(e));

  await t.test("the latest decisions of a namespace", async (t) => {
    const latest = [...ours.filter(inA)].sort((a, b) => b.time - a.time).slice(0, 10);
    t.same(
      await rows(`SELECT identifier, passed, tokens FROM ratelimits_v1 WHERE namespace_id = '${NS_A}' ORDER BY time DESC LIMIT 10`),
      latest.map((e) => ({ identifier: e.identifier, passed: e.passed, tokens: e.tokens })),
    );
  });

  await t.test("average, p75 and p99 latency of the last 24 hours", async (t) => {
    const [row] = await rows(`SELECT
  avgMerge(latency_avg) AS average_latency,
  quantilesTDigestMerge(0.75)(latency_p75)[1] AS p75_latency,
  quantilesTDigestMerge(0.99)(latency_p99)[1] AS p99_latency
FROM ratelimits_per_hour_v1
WHERE namespace_id = '${NS_A}'
  AND time >= now() - INTERVAL 24 HOUR`);
    const latencies = recentA.map((e) => e.latencyMs);
    t.equal(round6(Number(row?.average_latency)), round6(mean(latencies)));
    t.ok(Number(row?.p75_latency) >= Math.min(...latencies) && Number(row?.p75_latency) <= Number(row?.p99_latency));
    t.ok(Number(row?.p99_latency) <= Math.max(...latencies));
  });

  await t.test("a zero-filled series of every minute of the last 6 hours", async (t) => {
    const series = await rows(ownNames(SERIES));
    t.equal(series.length, 360, "one row per minute");
    const minutes = series.map((row) => Date.parse(`${String(row.time).replace(" ", "T")}Z`));
    t.ok(
      minutes.every((minute, n) => n === 0 || minute - (minutes[n - 1] as number) === MINUTE),
      "consecutive minutes",
    );
    const bucket = (e: RatelimitEvent) => String(e.time - (e.time % MINUTE));
    const expected = Object.fromEntries(
      Object.entries(TOTALS).map(([column, weight]) => [
        column,
        Object.fromEntries(Object.entries(tally(recentA, bucket, weight)).filter(([, value]) => value !== 0)),
      ]),
    );
    const got = (column: string) =>
      Object.fromEntries(series.map((row, n) => [String(minutes[n]), Number(row[column])]).filter(([, value]) => value !== 0));
    t.same(got("total_requests"), expected.n, "requests per minute, zero where none");
    t.same(got("passed_requests"), expected.p, "passed per minute");
    t.same(got("tokens_total"), expected.tt, "tokens per minute");
    t.same(got("tokens_passed"), expected.pt, "passed tokens per minute");
    t.ok(
      series.every(
        (row) =>
          row.blocked_requests === Number(row.total_requests) - Number(row.passed_requests) &&
          row.blocked_tokens === Number(row.tokens_total) - Number(row.tokens_passed),
      ),
      "blocked is total minus passed",
    );
    t.equal(series.filter((row) => row.total_requests === 0).length, 360 - Object.keys(expected.n ?? {}).length, "zeros fill the rest");
  });

  await t.test("daily totals of three identifiers combined", async (t) => {
    const three = ours.filter(
      (e) => inA(e) && ["customer_123", "customer_456", "customer_789"].includes(e.identifier) && within(30 * DAY)(e),
    );
    const day = (e: RatelimitEvent) => new Date(e.time).toISOString().slice(0, 10);
    const daily = await rows(ownNames(DAILY));
    t.same(asTally(daily, "time", "total_requests"), tally(three, day));
    t.same(asTally(daily, "time", "tokens_passed"), tally(three, day, TOTALS.pt));
    t.same(
      daily.map((row) => row.time),
      Object.keys(tally(three, day)).sort(),
      "one row per day, in order",
    );
  });

  await t.test("an identifier breakdown with countIf and sumIf, paginated", async (t) => {
    const breakdown = `SELECT
  identifier,
  max(time) AS last_request_time,
  countIf(passed) AS passed_requests,
  countIf(not passed) AS blocked_requests,
  count() AS total_requests,
  sumIf(tokens, passed) AS passed_tokens,
  sumIf(tokens, not passed) AS blocked_tokens,
  sum(tokens) AS total_tokens
FROM ratelimits_v1
WHERE namespace_id = '${NS_A}'
  AND time >= toUnixTimestamp64Milli(now64(3) - INTERVAL 7 DAY)
GROUP BY identifier
ORDER BY total_requests DESC, identifier ASC
LIMIT 50 OFFSET 0`;
    const week = ours.filter((e) => inA(e) && within(7 * DAY)(e));
    const expected = Object.entries(tally(week, (e) => e.identifier))
      .sort(([a, m], [b, n]) => n - m || (a < b ? -1 : 1))
      .map(([identifier]) => {
        const of = week.filter((e) => e.identifier === identifier);
        const sum = (weight: (e: RatelimitEvent) => number) => of.reduce((total, e) => total + weight(e), 0);
        return {
          identifier,
          last_request_time: Math.max(...of.map((e) => e.time)),
          passed_requests: sum(TOTALS.p),
          blocked_requests: of.length - sum(TOTALS.p),
          total_requests: of.length,
          passed_tokens: sum(TOTALS.pt),
          blocked_tokens: sum(TOTALS.tt) - sum(TOTALS.pt),
          total_tokens: sum(TOTALS.tt),
        };
      });
    t.same(await rows(breakdown), expected);
    t.same(await rows(breakdown.replace("LIMIT 50 OFFSET 0", "LIMIT 2 OFFSET 2")), expected.slice(2, 4), "the next page");
  });
});

t.test("the example queries docs/api.md gives for analytics.getRatelimits run and answer rows", async (t) => {
  const queries = documentedQueries("analytics.getRatelimits");
  t.ok(queries.length > 0);
  for (const query of queries) t.ok((await rows(query.replaceAll("rlns_…", NS_A))).length > 0, query);
});

t.test("a wildcard key sees every namespace of its workspace and nothing of another workspace", async (t) => {
  t.same(await rows("SELECT DISTINCT workspace_id FROM ratelimits_per_day_v1"), [{ workspace_id: WORKSPACE }]);
  const wildcard = await h.rootKey(["ratelimit.*.read_analytics"]);
  t.same(
    asTally(await rows("SELECT namespace_id, count() AS n FROM ratelimits_v1 GROUP BY namespace_id", wildcard), "namespace_id", "n"),
    tally(ours.filter(within(90 * DAY)), (e) => e.namespaceId),
  );
  t.same(await rows("SELECT DISTINCT identifier, workspace_id FROM ratelimits_per_hour_v1", OTHER_ROOT_KEY), [
    { identifier: "zz_secret_identifier", workspace_id: OTHER_WORKSPACE },
  ]);
  t.same(await rows("SELECT count() AS n FROM ratelimits_v1 WHERE namespace_id = 'rlns_zzsecret'"), [{ n: 0 }]);
});

t.test("a per-namespace key sees only the rows of its namespaces", async (t) => {
  const onlyA = await h.rootKey([`ratelimit.${NS_A}.read_analytics`]);
  t.same(await rows("SELECT DISTINCT namespace_id FROM ratelimits_per_minute_v1", onlyA), [{ namespace_id: NS_A }]);
  t.same(
    await rows(`SELECT count() AS n FROM ratelimits_v1 WHERE namespace_id = '${NS_B}'`, onlyA),
    [{ n: 0 }],
    "naming another returns nothing",
  );
  t.same(await rows("SELECT sum(total) AS n FROM ratelimits_per_day_v1 WHERE identifier = 'zz_nsb_user'", onlyA), [{ n: 0 }]);
  const both = await h.rootKey([`ratelimit.${NS_A}.read_analytics`, `ratelimit.${NS_B}.read_analytics`]);
  t.same(
    asTally(
      await rows("SELECT namespace_id, sum(total) AS n FROM ratelimits_per_hour_v1 GROUP BY namespace_id", both),
      "namespace_id",
      "n",
    ),
    tally(ours.filter(within(90 * DAY)), (e) => e.namespaceId),
  );
  const actions = await h.rootKey([`ratelimit.${NS_B}.*`]);
  t.same(
    await rows("SELECT DISTINCT namespace_id FROM ratelimits_v1", actions),
    [{ namespace_id: NS_B }],
    "ratelimit.<id>.* grants it too",
  );
  const otherAction = await h.rootKey([`ratelimit.${NS_A}.read_analytics`, `ratelimit.${NS_B}.limit`]);
  t.same(
    await rows("SELECT DISTINCT namespace_id FROM ratelimits_v1", otherAction),
    [{ namespace_id: NS_A }],
    "another action grants nothing",
  );
});

t.test("a permission naming something no namespace id can be reads nothing", async (t) => {
  const odd = await h.rootKey(["ratelimit.my-namespace.read_analytics"]);
  t.same(await rows("SELECT count() AS n FROM ratelimits_v1", odd), [{ n: 0 }]);
});

t.test("read_analytics of rate limits is its own permission", async (t) => {
  for (const permissions of [["api.*.read_analytics"], ["ratelimit.*.limit", "ratelimit.*.read_override"]]) {
    assertError(
      t,
      await h.call("analytics.getRatelimits", { query: "SELECT 1 AS one" }, { rootKey: await h.rootKey(permissions) }),
      "err:unkey:authorization:insufficient_permissions",
      /ratelimit\.\*\.read_analytics/,
    );
  }
});

const QUERY = `SELECT identifier, sum(total) AS total FROM ratelimits_per_day_v1 WHERE time >= today() - 7 GROUP BY identifier`;
await checkUnauthenticated(t, h, "analytics.getRatelimits", { query: QUERY });
await checkPermissions(t, h, "analytics.getRatelimits", () => ({ query: QUERY }), {
  missing: ["ratelimit.*.read_analytics", "ratelimit.<namespaceId>.read_analytics"],
  accepted: [["ratelimit.*.read_analytics"], [`ratelimit.${NS_A}.read_analytics`], ["ratelimit.*"], ["*"]],
});

t.test("only the rate limit tables: another family's table is a 400 that names the ones allowed", async (t) => {
  for (const table of ["key_verifications_v1", "key_verifications_per_day_v1", "gateway_requests_v1"]) {
    assertError(
      t,
      await h.call("analytics.getRatelimits", { query: `SELECT count() FROM ${table}` }),
      "err:user:bad_request:invalid_analytics_table",
      /ratelimits_v1.*ratelimits_per_month_v1/,
    );
  }
});

t.test("rows older than a table's retention are not visible, and asking for them is 400", async (t) => {
  t.same(await rows("SELECT count() AS n FROM ratelimits_v1 WHERE identifier = 'customer_old'"), [{ n: 0 }], "raw keeps 90 days");
  t.same(
    await rows("SELECT sum(total) AS n FROM ratelimits_per_day_v1 WHERE identifier = 'customer_old'"),
    [{ n: 1 }],
    "per day keeps 365",
  );
  assertError(
    t,
    await h.call("analytics.getRatelimits", {
      query: "SELECT sum(total) FROM ratelimits_per_hour_v1 WHERE time > now() - INTERVAL 100 DAY",
    }),
    "err:user:bad_request:query_range_exceeds_retention",
    /ratelimits_per_hour_v1 keeps 90 days/,
  );
});

t.test("with analytics off, getRatelimits answers 412 and the sink drops events, counted", async (t) => {
  const off = await harness(t);
  assertError(t, await off.call("analytics.getRatelimits", { query: QUERY }), "err:unkey:data:analytics_not_configured", /off/);
  off.app.services.analytics.sinks.ratelimits.record(ratelimitEvent());
  t.match(off.app.analytics.stats(), { recorded: 1, written: 0, dropped: { disabled: 1 } });
});

for (const storage of STORAGE_KINDS) {
  t.test(`the three analytics procedures share one per-workspace query quota (${storage} stores)`, async (t) => {
    // Frozen at the real time: were the quota's fixed window to roll over before the fourth query, it would pass.
    const limited = await harness(t, {
      storage,
      clock: new ManualClock(Date.now()),
      config: analytics({ quota: { queries: 3, windowMs: 60_000, executionMs: 60_000 } }),
    });
    const procedures = ["analytics.getRatelimits", "analytics.getVerifications", "analytics.getGatewayRequests"];
    for (const procedure of procedures) t.equal((await limited.call(procedure, { query: "SELECT 1 AS one" })).status, 200, procedure);
    for (const procedure of procedures) {
      const refused = await limited.call(procedure, { query: "SELECT 1 AS one" });
      assertError(t, refused, "err:user:too_many_requests:query_quota_exceeded", /3 queries/);
      t.match(refused.headers["retry-after"], /^\d+$/);
    }
    t.equal(
      (await limited.call("analytics.getRatelimits", { query: "SELECT 1 AS one" }, { rootKey: OTHER_ROOT_KEY })).status,
      200,
      "another workspace has its own quota",
    );
  });
}
