import { createClient } from "@clickhouse/client";
import { createChdbConnection } from "chdb/connection";
import t from "tap";
import { openAnalytics } from "../../src/analytics/index.js";
import { validateConfig } from "../../src/config/load.js";
import { systemClock } from "../../src/lib/clock.js";
import { analyticsDir, event, GATEWAY_REQUESTS_BEFORE_BODIES, gatewayRequestEvent } from "../helpers/analytics.js";
import { assertError } from "../helpers/assertions.js";
import { harness, OTHER_ROOT_KEY, OTHER_WORKSPACE } from "../helpers/harness.js";

/**
 * The `clickhouse` engine is keygate's @clickhouse/client adapter. There is no ClickHouse server on the test
 * machine (Debian's package is 18.16, far older than the 24.3 keygate needs), so its HTTP transport is only tested
 * for an unreachable server here. Everything above the transport (schema statements, inserts, bound parameters,
 * query results, ClickHouse error codes) runs against a real ClickHouse engine through the client's own connection
 * hook over chDB. That hook cannot switch databases, so the analytics database here is `default`.
 */

t.test("the clickhouse adapter against a real engine: schema, inserts, the example query, confinement, errors", async (t) => {
  const dir = analyticsDir(t);
  const raw = { analytics: { engine: "clickhouse", clickhouse: { url: "http://chdb.invalid:8123", database: "default" } } };
  const config = validateConfig(raw);
  // A server that an older keygate wrote to: its gateway_requests_v1 has no body columns yet.
  const older = createClient({ connection: createChdbConnection({ path: dir }) as never });
  await older.command({ query: GATEWAY_REQUESTS_BEFORE_BODIES.replace("keygate.", "default.") });
  await older.close();
  const runtime = await openAnalytics(config.analytics, {
    clock: systemClock,
    // chdb types the hook against its own copy of @clickhouse/client-common; the shapes are the same.
    createClickHouseClient: (options) => createClient({ connection: createChdbConnection({ path: dir }) as never, ...options }),
  });
  t.teardown(() => runtime.close());
  t.match(runtime.describe(), /ClickHouse server at http:\/\/chdb\.invalid:8123\/? \(database default\)/);
  const h = await harness(t, { config: raw, analytics: runtime });

  const outcomes = ["VALID", "VALID", "VALID", "RATE_LIMITED", "USAGE_EXCEEDED"] as const;
  for (const [n, outcome] of outcomes.entries()) runtime.sinks.verifications.record(event({ externalId: `user_${n % 2}`, outcome }));
  runtime.sinks.verifications.record(event({ workspaceId: OTHER_WORKSPACE, externalId: "zz_secret_external" }));
  await runtime.flush();
  t.match(runtime.stats(), { written: 6, failedWrites: 0 });

  const spec = await h.call("analytics.getVerifications", {
    query:
      "SELECT external_id, SUM(count) AS total, sumIf(count, outcome = 'VALID') AS valid FROM key_verifications_per_day_v1 WHERE time >= now() - INTERVAL 7 DAY GROUP BY external_id ORDER BY total DESC LIMIT 10",
  });
  t.equal(spec.status, 200, JSON.stringify(spec.body));
  t.same(spec.body.data, [
    { external_id: "user_0", total: 3, valid: 2 },
    { external_id: "user_1", total: 2, valid: 1 },
  ]);
  const perOutcome = await h.call("analytics.getVerifications", {
    query: "SELECT outcome, count() AS n FROM key_verifications_v1 GROUP BY outcome ORDER BY outcome",
  });
  t.same(perOutcome.body.data, [
    { outcome: "RATE_LIMITED", n: 1 },
    { outcome: "USAGE_EXCEEDED", n: 1 },
    { outcome: "VALID", n: 3 },
  ]);
  const theirs = await h.call(
    "analytics.getVerifications",
    { query: "SELECT external_id FROM key_verifications_v1" },
    { rootKey: OTHER_ROOT_KEY },
  );
  t.same(theirs.body.data, [{ external_id: "zz_secret_external" }]);
  assertError(
    t,
    await h.call("analytics.getVerifications", {
      query: "SELECT * FROM key_verifications_v1 WHERE workspace_id = 'ws_other' SETTINGS readonly = 0",
    }),
    "err:user:bad_request:invalid_analytics_query",
  );
  assertError(
    t,
    await h.call("analytics.getVerifications", { query: "SELECT * FROM system.tables" }),
    "err:user:bad_request:invalid_analytics_table",
  );
  const unknown = await h.call("analytics.getVerifications", { query: "SELECT no_such_column FROM key_verifications_v1" });
  assertError(t, unknown, "err:user:bad_request:invalid_analytics_query", /no_such_column/);

  runtime.sinks.gatewayRequests.record(
    gatewayRequestEvent({ requestId: "req_server_bodies", requestBody: '{"a":1}', responseBody: "ok 🔑" }),
  );
  await runtime.flush();
  const bodies = await h.call("analytics.getGatewayRequests", {
    query: "SELECT request_body, response_body FROM gateway_requests_v1 WHERE request_id = 'req_server_bodies'",
  });
  t.same(
    bodies.body.data,
    [{ request_body: '{"a":1}', response_body: "ok 🔑" }],
    "the table got its body columns at start; a row as JSON holds them",
  );
});

t.test("an unreachable ClickHouse server: keygate starts, queries answer 503, events wait and are counted when lost", async (t) => {
  const h = await harness(t, {
    config: {
      analytics: {
        engine: "clickhouse",
        clickhouse: { url: "http://127.0.0.1:1", requestTimeoutMs: 1_000 },
        // A request timeout must outlast the longest query allowed (config/consistency.ts).
        query: { maxExecutionMs: 500 },
        buffer: { flushIntervalMs: 600_000 },
      },
    },
  });
  assertError(t, await h.call("analytics.getVerifications", { query: "SELECT 1" }), "err:unkey:data:analytics_connection_failed");
  for (let n = 0; n < 3; n++) h.app.services.analytics.sinks.verifications.record(event());
  await h.app.analytics.flush();
  t.match(h.app.analytics.stats(), { recorded: 3, written: 0, buffered: 3, dropped: { writeFailed: 0 } }, "kept for a retry");
  t.ok(h.app.analytics.stats().failedWrites >= 1);
  await h.app.close();
  t.match(h.app.analytics.stats(), { written: 0, buffered: 0, dropped: { writeFailed: 3 } }, "lost at close, and counted");
});
