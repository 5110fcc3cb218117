import t from "tap";
import { EmbeddedEngine } from "../../src/analytics/embedded-engine.js";
import { EMBEDDED_DATABASE, openAnalytics } from "../../src/analytics/index.js";
import { CREDIT_REFUNDS, GATEWAY_REQUESTS, VERIFICATIONS } from "../../src/analytics/rows.js";
import { schemaStatements } from "../../src/analytics/schema.js";
import { validateConfig } from "../../src/config/load.js";
import type { AnalyticsQueryEngine } from "../../src/domain/analytics/query-engine.js";
import {
  analyticsDir,
  creditRefundEvent,
  event,
  GATEWAY_REQUESTS_BEFORE_BODIES,
  gatewayRequestEvent,
  VERIFICATIONS_BEFORE_CREDITS_SOURCE,
} from "../helpers/analytics.js";

const columnsOf = (engine: AnalyticsQueryEngine, table: string) =>
  engine.withConnection(async (connection) => (await connection.rows(`DESCRIBE TABLE ${table}`)).map((row) => row.name));

t.test("an embedded engine with tables of an older keygate gets the new columns at start, and keeps its rows", async (t) => {
  const dir = analyticsDir(t);
  const before = await EmbeddedEngine.open(dir, EMBEDDED_DATABASE);
  await before.command(GATEWAY_REQUESTS_BEFORE_BODIES);
  await before.command(
    `INSERT INTO ${EMBEDDED_DATABASE}.gateway_requests_v1 (request_id, time, workspace_id, api_id, app_id, path, response_status) ` +
      `VALUES ('req_before_bodies', ${Date.now()}, 'ws_upgrade', 'api_upgrade', 'orders', '/orders/old', 200)`,
  );
  // Verifications from before credits_source: which balance paid is unknown for them.
  await before.command(VERIFICATIONS_BEFORE_CREDITS_SOURCE);
  await before.command(
    `INSERT INTO ${EMBEDDED_DATABASE}.key_verifications_v1 (request_id, time, workspace_id, key_id, outcome, spent_credits) ` +
      `VALUES ('req_before_source', ${Date.now()}, 'ws_upgrade', 'key_upgrade', 'VALID', 2)`,
  );
  await before.close();

  const config = validateConfig({ analytics: { engine: "embedded", path: dir } });
  for (const start of ["first start", "second start"]) {
    const analytics = await openAnalytics(config.analytics, { clock: { now: () => Date.now() } });
    const engine = analytics.engine;
    if (!engine) throw new Error("the embedded engine is open");
    t.same(await columnsOf(engine, "gateway_requests_v1"), [...GATEWAY_REQUESTS.columns], `${start}: the columns events are written with`);
    analytics.sinks.gatewayRequests.record(
      gatewayRequestEvent({
        requestId: `req_${start.replace(" ", "_")}`,
        workspaceId: "ws_upgrade",
        requestBody: '{"order":1}',
        responseBody: "ünïcødé 🔑",
      }),
    );
    await analytics.flush();
    t.match(analytics.stats(), { written: 1, failedWrites: 0 }, start);
    const rows = await engine.withConnection((connection) =>
      connection.rows(
        "SELECT request_id, path, request_body, response_body FROM gateway_requests_v1 WHERE workspace_id = 'ws_upgrade' ORDER BY request_id",
      ),
    );
    t.same(
      rows.find((row) => row.request_id === "req_before_bodies"),
      { request_id: "req_before_bodies", path: "/orders/old", request_body: "", response_body: "" },
      `${start}: the row written before reads empty bodies`,
    );
    t.match(
      rows.find((row) => row.request_id === `req_${start.replace(" ", "_")}`),
      { request_body: '{"order":1}', response_body: "ünïcødé 🔑" },
      `${start}: a new row holds its bodies`,
    );
    t.same(await columnsOf(engine, "key_verifications_v1"), [...VERIFICATIONS.columns], `${start}: the verification columns`);
    analytics.sinks.verifications.record(
      event({ requestId: `req_source_${start.replace(" ", "_")}`, workspaceId: "ws_upgrade", spentCredits: 1, creditsSource: "identity" }),
    );
    await analytics.flush();
    const verifications = await engine.withConnection((connection) =>
      connection.rows(
        "SELECT request_id, spent_credits, credits_source FROM key_verifications_v1 WHERE workspace_id = 'ws_upgrade' ORDER BY request_id",
      ),
    );
    t.same(
      verifications.find((row) => row.request_id === "req_before_source"),
      { request_id: "req_before_source", spent_credits: "2", credits_source: "" },
      `${start}: a verification written before reads no credits source`,
    );
    t.match(
      verifications.find((row) => row.request_id === `req_source_${start.replace(" ", "_")}`),
      { spent_credits: "1", credits_source: "identity" },
      `${start}: a new one holds which balance paid`,
    );
    // Refunds came after both: their table is new, made at start beside the rows kept.
    t.same(await columnsOf(engine, "credit_refunds_v1"), [...CREDIT_REFUNDS.columns], `${start}: the refunds table`);
    analytics.sinks.creditRefunds.record(
      creditRefundEvent({
        requestId: `req_source_${start.replace(" ", "_")}`,
        workspaceId: "ws_upgrade",
        credits: 1,
        creditsSource: "identity",
      }),
    );
    await analytics.flush();
    const refunds = await engine.withConnection((connection) =>
      connection.rows("SELECT request_id, refunded_credits, credits_source FROM credit_refunds_v1 WHERE workspace_id = 'ws_upgrade'"),
    );
    t.match(
      refunds.find((row) => row.request_id === `req_source_${start.replace(" ", "_")}`),
      { refunded_credits: "1", credits_source: "identity" },
      `${start}: a refund is written under its verification's request id`,
    );
    await analytics.close();
  }

  // A new installation (another database of the same directory: chDB binds one directory per process).
  const fresh = await EmbeddedEngine.open(dir, "keygate_fresh");
  t.teardown(() => fresh.close());
  for (const statement of schemaStatements("keygate_fresh", {
    raw: 90,
    perMinute: 90,
    perHour: 90,
    perDay: 365,
    perMonth: 1_095,
    audit: 365,
  }))
    await fresh.command(statement);
  t.same(
    await columnsOf(fresh, "keygate_fresh.gateway_requests_v1"),
    [...GATEWAY_REQUESTS.columns],
    "a new table: the same columns, in the same order",
  );
  t.same(await columnsOf(fresh, "keygate_fresh.key_verifications_v1"), [...VERIFICATIONS.columns], "and the same for verifications");
  t.same(await columnsOf(fresh, "keygate_fresh.credit_refunds_v1"), [...CREDIT_REFUNDS.columns], "and for refunds");
});
