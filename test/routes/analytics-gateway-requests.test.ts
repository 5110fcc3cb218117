import t from "tap";
import type { GatewayRequestEvent } from "../../src/domain/analytics/events.js";
import { analyticsDir, analyticsRows, asTally, documentedQueries, gatewayRequestEvent, tally } from "../helpers/analytics.js";
import { assertError, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { harness, OTHER_ROOT_KEY, OTHER_WORKSPACE, WORKSPACE } from "../helpers/harness.js";

const NOW = Date.now();
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const h = await harness(t, {
  config: { analytics: { engine: "embedded", path: analyticsDir(t), query: { maxExecutionMs: 5_000, maxResultRows: 1_000 } } },
});
const apiA = (await h.call("apis.createApi", { name: "alpha" })).body.data.apiId as string;
const apiB = (await h.call("apis.createApi", { name: "beta" })).body.data.apiId as string;
const apiC = (await h.call("apis.createApi", { name: "gamma" }, { rootKey: OTHER_ROOT_KEY })).body.data.apiId as string;

const STATUSES = [200, 200, 201, 404, 500, 502, 503];
const PATHS = ["/v1/orders", "/v1/orders/42", "/v1/invoices", "/v1/health"];
const recorded: GatewayRequestEvent[] = [];
for (let i = 0; i < 60; i++) {
  const total = 5 + i;
  const upstream = 3 + Math.floor(i / 2);
  recorded.push(
    gatewayRequestEvent({
      apiId: apiA,
      route: i % 3 === 0 ? "billing" : "orders",
      method: i % 2 === 0 ? "GET" : "POST",
      path: PATHS[i % 4] as string,
      responseStatus: STATUSES[i % 7] as number,
      totalLatencyMs: total,
      upstreamLatencyMs: upstream,
      gatewayLatencyMs: total - upstream,
      time: NOW - MINUTE - i * 5 * MINUTE,
    }),
  );
}
for (let n = 0; n < 4; n++)
  recorded.push(gatewayRequestEvent({ apiId: apiA, route: "orders", path: "/v1/old", responseStatus: 500, time: NOW - (2 + n) * DAY }));
for (let n = 0; n < 6; n++) {
  recorded.push(
    gatewayRequestEvent({
      apiId: apiB,
      route: "zz_apib_route",
      path: "/zz_apib",
      responseStatus: 500,
      time: NOW - 30 * MINUTE - n * HOUR,
    }),
  );
}
for (let n = 0; n < 10; n++) {
  recorded.push(
    gatewayRequestEvent({
      requestId: `req_zzsecret${n}`,
      workspaceId: OTHER_WORKSPACE,
      apiId: apiC,
      route: "zz_secret_route",
      path: "/zz_secret",
      responseStatus: 500,
      time: NOW - n * HOUR,
    }),
  );
}
// Older than the raw table's 90 days.
recorded.push(gatewayRequestEvent({ apiId: apiA, path: "/v1/ancient", time: NOW - 120 * DAY }));
const exact = gatewayRequestEvent({
  requestId: "req_exact",
  apiId: apiA,
  route: "orders",
  method: "DELETE",
  host: "orders.example.com",
  path: "/v1/orders/7",
  queryString: "expand=items&key=REDACTED",
  responseStatus: 204,
  userAgent: "curl/8.5.0",
  ipAddress: "2001:db8::7",
  totalLatencyMs: 12.5,
  upstreamLatencyMs: 10.25,
  gatewayLatencyMs: 2.25,
  keyId: "key_exact",
  outcome: "VALID",
  requestHeaders: ["Accept: application/json", "Authorization: <redacted>"],
  responseHeaders: ["Content-Length: 0"],
  requestBody: '{"note":"tab\there, new\nline, quote\' and ünïcødé 🔑"}',
  responseBody: `[${"7,".repeat(4_000)}7]`,
  time: NOW - 3 * DAY,
});
recorded.push(exact);
for (const e of recorded) h.app.services.analytics.sinks.gatewayRequests.record(e);
await h.app.analytics.flush();

const ours = recorded.filter((e) => e.workspaceId === WORKSPACE && e.time >= NOW - 90 * DAY);
const within = (ms: number) => (e: GatewayRequestEvent) => e.time >= NOW - ms;
const rows = (query: string, rootKey?: string) => analyticsRows(h, "analytics.getGatewayRequests", query, rootKey);

t.test("a row holds what the gateway recorded, column for column", async (t) => {
  t.same(
    await rows(
      "SELECT request_id, time, workspace_id, api_id, app_id, method, host, path, query_string, request_headers, response_status, response_headers, user_agent, ip_address, total_latency, instance_latency, gateway_latency, key_id, outcome, request_body, response_body FROM gateway_requests_v1 WHERE request_id = 'req_exact'",
    ),
    [
      {
        request_id: "req_exact",
        time: exact.time,
        workspace_id: WORKSPACE,
        api_id: apiA,
        app_id: "orders",
        method: "DELETE",
        host: "orders.example.com",
        path: "/v1/orders/7",
        query_string: "expand=items&key=REDACTED",
        request_headers: ["Accept: application/json", "Authorization: <redacted>"],
        response_status: 204,
        response_headers: ["Content-Length: 0"],
        user_agent: "curl/8.5.0",
        ip_address: "2001:db8::7",
        total_latency: 12.5,
        instance_latency: 10.25,
        gateway_latency: 2.25,
        key_id: "key_exact",
        outcome: "VALID",
        request_body: exact.requestBody,
        response_body: exact.responseBody,
      },
    ],
  );
  t.same(
    (await rows("SELECT * FROM gateway_requests_v1 WHERE request_id = 'req_exact'")).flatMap((row) => Object.keys(row).slice(-3)),
    ["outcome", "request_body", "response_body"],
    "the bodies are the table's last columns",
  );
});

t.test("Unkey's example queries work as written", async (t) => {
  await t.test("the latest requests", async (t) => {
    const latest = [...ours].sort((a, b) => b.time - a.time).slice(0, 10);
    t.same(
      await rows("SELECT path, response_status, total_latency FROM gateway_requests_v1 ORDER BY time DESC LIMIT 10"),
      latest.map((e) => ({ path: e.path, response_status: e.responseStatus, total_latency: e.totalLatencyMs })),
    );
  });

  await t.test("the requests of one app in the last 24 hours", async (t) => {
    for (const app of ["orders", "billing", "no_such_app"]) {
      t.same(
        await rows(
          `SELECT count() AS total FROM gateway_requests_v1 WHERE app_id = '${app}' AND time >= toUnixTimestamp64Milli(now64(3) - INTERVAL 24 HOUR)`,
        ),
        [{ total: ours.filter((e) => e.route === app && within(DAY)(e)).length }],
        app,
      );
    }
  });

  await t.test("the p95 of total latency in the last hour", async (t) => {
    // ClickHouse's quantile keeps every value of a sample this small and interpolates between neighbours.
    const sorted = ours
      .filter(within(HOUR))
      .map((e) => e.totalLatencyMs)
      .sort((a, b) => a - b);
    const position = 0.95 * (sorted.length - 1);
    const [below, above] = [sorted[Math.floor(position)] as number, sorted[Math.ceil(position)] as number];
    const [row] = await rows(
      "SELECT quantile(0.95)(total_latency) AS p95 FROM gateway_requests_v1 WHERE time >= toUnixTimestamp64Milli(now64(3) - INTERVAL 1 HOUR)",
    );
    t.ok(sorted.length > 10);
    t.ok(Math.abs(Number(row?.p95) - (below + (above - below) * (position - Math.floor(position)))) < 1e-9, `p95 ${row?.p95}`);
  });

  await t.test("the paths with the most server errors", async (t) => {
    const answer = await rows(`SELECT
  path,
  count() AS total
FROM gateway_requests_v1
WHERE response_status >= 500
  AND time >= toUnixTimestamp64Milli(now64(3) - INTERVAL 24 HOUR)
GROUP BY path
ORDER BY total DESC
LIMIT 10`);
    t.same(
      asTally(answer, "path", "total"),
      tally(
        ours.filter((e) => e.responseStatus >= 500 && within(DAY)(e)),
        (e) => e.path,
      ),
    );
    const totals = answer.map((row) => Number(row.total));
    t.same(
      totals,
      [...totals].sort((a, b) => b - a),
      "most first",
    );
  });

  await t.test("the status codes of each app", async (t) => {
    const answer = await rows(`SELECT
  app_id,
  response_status,
  count() AS total
FROM gateway_requests_v1
WHERE time >= toUnixTimestamp64Milli(now64(3) - INTERVAL 7 DAY)
GROUP BY app_id, response_status
ORDER BY app_id, total DESC`);
    t.same(
      Object.fromEntries(answer.map((row) => [`${row.app_id} ${row.response_status}`, row.total])),
      tally(ours.filter(within(7 * DAY)), (e) => `${e.route} ${e.responseStatus}`),
    );
    t.ok(
      answer.every((row, n) => {
        const previous = answer[n - 1];
        return !previous || String(previous.app_id) < String(row.app_id) || Number(previous.total) >= Number(row.total);
      }),
      "by app, then most first",
    );
  });

  await t.test("an error rate per app (the deployment example, by app_id)", async (t) => {
    const answer = await rows(`SELECT
  app_id,
  count() AS total,
  countIf(response_status >= 500) AS errors,
  round(countIf(response_status >= 500) / count() * 100, 2) AS error_rate
FROM gateway_requests_v1
WHERE time >= toUnixTimestamp64Milli(now64(3) - INTERVAL 24 HOUR)
GROUP BY app_id
ORDER BY error_rate DESC`);
    const day = ours.filter(within(DAY));
    t.same(
      Object.fromEntries(answer.map(({ app_id, ...rest }) => [app_id, rest])),
      Object.fromEntries(
        Object.entries(tally(day, (e) => e.route)).map(([app, total]) => {
          const errors = day.filter((e) => e.route === app && e.responseStatus >= 500).length;
          return [app, { total, errors, error_rate: Math.round((errors / total) * 10_000) / 100 }];
        }),
      ),
    );
    const rates = answer.map((row) => Number(row.error_rate));
    t.same(
      rates,
      [...rates].sort((a, b) => b - a),
      "highest rate first",
    );
  });

  await t.test("a zero-filled series of every minute of the last 6 hours", async (t) => {
    const series = await rows(`SELECT
  toStartOfMinute(fromUnixTimestamp64Milli(time)) AS minute,
  count() AS requests
FROM gateway_requests_v1
WHERE app_id = 'orders'
  AND time >= toUnixTimestamp64Milli(now64(3) - INTERVAL 6 HOUR)
GROUP BY minute
ORDER BY minute WITH FILL
  FROM toStartOfMinute(now() - INTERVAL 6 HOUR)
  TO toStartOfMinute(now())
  STEP INTERVAL 1 MINUTE`);
    t.equal(series.length, 360, "one row per minute");
    const minutes = series.map((row) => Date.parse(`${String(row.minute).replace(" ", "T")}Z`));
    t.ok(
      minutes.every((minute, n) => n === 0 || minute - (minutes[n - 1] as number) === MINUTE),
      "consecutive minutes",
    );
    t.same(
      Object.fromEntries(series.flatMap((row, n) => (row.requests === 0 ? [] : [[String(minutes[n]), row.requests]]))),
      tally(
        ours.filter((e) => e.route === "orders" && within(6 * HOUR)(e)),
        (e) => String(e.time - (e.time % MINUTE)),
      ),
      "requests per minute, zero where none",
    );
  });
});

t.test("the example queries docs/api.md gives for analytics.getGatewayRequests run and answer rows", async (t) => {
  const queries = documentedQueries("analytics.getGatewayRequests");
  t.ok(queries.length > 0);
  for (const query of queries) t.ok((await rows(query)).length > 0, query);
});

t.test("a wildcard key sees every API of its workspace and nothing of another workspace", async (t) => {
  t.same(await rows("SELECT DISTINCT workspace_id FROM gateway_requests_v1"), [{ workspace_id: WORKSPACE }]);
  const wildcard = await h.rootKey(["api.*.read_analytics"]);
  t.same(
    asTally(await rows("SELECT api_id, count() AS n FROM gateway_requests_v1 GROUP BY api_id", wildcard), "api_id", "n"),
    tally(ours, (e) => e.apiId),
  );
  t.same(await rows("SELECT DISTINCT path, workspace_id FROM gateway_requests_v1", OTHER_ROOT_KEY), [
    { path: "/zz_secret", workspace_id: OTHER_WORKSPACE },
  ]);
  t.same(await rows(`SELECT count() AS n FROM gateway_requests_v1 WHERE api_id = '${apiC}' OR path = '/zz_secret'`), [{ n: 0 }]);
});

t.test("a per-API key sees only the requests of its APIs' routes", async (t) => {
  const onlyA = await h.rootKey([`api.${apiA}.read_analytics`]);
  t.same(await rows("SELECT DISTINCT api_id FROM gateway_requests_v1", onlyA), [{ api_id: apiA }]);
  t.same(
    await rows(`SELECT count() AS n FROM gateway_requests_v1 WHERE api_id = '${apiB}'`, onlyA),
    [{ n: 0 }],
    "naming another returns nothing",
  );
  t.same(await rows("SELECT count() AS n FROM gateway_requests_v1 WHERE app_id = 'zz_apib_route'", onlyA), [{ n: 0 }]);
  const both = await h.rootKey([`api.${apiA}.read_analytics`, `api.${apiB}.read_analytics`]);
  t.same(
    asTally(await rows("SELECT api_id, count() AS n FROM gateway_requests_v1 GROUP BY api_id", both), "api_id", "n"),
    tally(ours, (e) => e.apiId),
  );
  const actions = await h.rootKey([`api.${apiB}.*`]);
  t.same(await rows("SELECT DISTINCT api_id FROM gateway_requests_v1", actions), [{ api_id: apiB }], "api.<id>.* grants it too");
  const readApi = await h.rootKey([`api.${apiA}.read_analytics`, `api.${apiB}.read_api`]);
  t.same(await rows("SELECT DISTINCT api_id FROM gateway_requests_v1", readApi), [{ api_id: apiA }], "read_api grants nothing");
});

t.test("a permission naming something no API id can be reads nothing", async (t) => {
  const odd = await h.rootKey(["api.my-api.read_analytics"]);
  t.same(await rows("SELECT count() AS n FROM gateway_requests_v1", odd), [{ n: 0 }]);
});

t.test("the API read_analytics permission: rate limit analytics is not enough", async (t) => {
  assertError(
    t,
    await h.call(
      "analytics.getGatewayRequests",
      { query: "SELECT 1 AS one" },
      { rootKey: await h.rootKey(["ratelimit.*.read_analytics"]) },
    ),
    "err:unkey:authorization:insufficient_permissions",
    /api\.\*\.read_analytics/,
  );
});

const QUERY = "SELECT path, count() AS total FROM gateway_requests_v1 GROUP BY path";
await checkUnauthenticated(t, h, "analytics.getGatewayRequests", { query: QUERY });
await checkPermissions(t, h, "analytics.getGatewayRequests", () => ({ query: QUERY }), {
  missing: ["api.*.read_analytics", "api.<apiId>.read_analytics"],
  accepted: [["api.*.read_analytics"], [`api.${apiA}.read_analytics`], ["api.*"], ["*"]],
});

t.test("only gateway_requests_v1: another family's table is a 400 that names it", async (t) => {
  for (const table of ["key_verifications_v1", "ratelimits_v1", "ratelimits_per_minute_v1"]) {
    assertError(
      t,
      await h.call("analytics.getGatewayRequests", { query: `SELECT count() FROM ${table}` }),
      "err:user:bad_request:invalid_analytics_table",
      /gateway_requests_v1/,
    );
  }
});

t.test("requests older than the table's retention are not visible, and asking for them is 400", async (t) => {
  t.same(await rows("SELECT count() AS n FROM gateway_requests_v1 WHERE path = '/v1/ancient'"), [{ n: 0 }], "raw keeps 90 days");
  assertError(
    t,
    await h.call("analytics.getGatewayRequests", {
      query: "SELECT count() FROM gateway_requests_v1 WHERE time >= toUnixTimestamp64Milli(now64() - INTERVAL 200 DAY)",
    }),
    "err:user:bad_request:query_range_exceeds_retention",
    /gateway_requests_v1 keeps 90 days/,
  );
});

t.test("with analytics off, getGatewayRequests answers 412 and the sink drops events, counted", async (t) => {
  const off = await harness(t);
  assertError(t, await off.call("analytics.getGatewayRequests", { query: QUERY }), "err:unkey:data:analytics_not_configured", /off/);
  off.app.services.analytics.sinks.gatewayRequests.record(gatewayRequestEvent());
  t.match(off.app.analytics.stats(), { recorded: 1, written: 0, dropped: { disabled: 1 } });
});
