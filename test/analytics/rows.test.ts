import t from "tap";
import { openAnalytics } from "../../src/analytics/index.js";
import { toRow, VERIFICATIONS } from "../../src/analytics/rows.js";
import { validateConfig } from "../../src/config/load.js";
import { analyticsDir, event } from "../helpers/analytics.js";

t.test("the compact row is the object row, value for value, in the order of the table's columns", async (t) => {
  const sample = event({ identityId: "id_1", externalId: "user_1", tags: ["a", "b"], spentCredits: 3, latencyMs: 0.25 });
  const row = toRow(VERIFICATIONS, sample, "local");
  t.same(Object.keys(row), [...VERIFICATIONS.columns], "every column once, in the table's order");
  t.same(
    VERIFICATIONS.values(sample, "local"),
    VERIFICATIONS.columns.map((column) => row[column]),
  );
});

t.test("numbers that are not finite are written as 0 in both encodings", async (t) => {
  const broken = event({ time: Number.NaN, spentCredits: Number.POSITIVE_INFINITY, latencyMs: Number.NEGATIVE_INFINITY });
  const values = VERIFICATIONS.values(broken, "local");
  const row = toRow(VERIFICATIONS, broken, "local");
  for (const column of ["time", "spent_credits", "latency"] as const) {
    t.equal(values[VERIFICATIONS.columns.indexOf(column)], 0, column);
    t.equal(row[column], 0, column);
  }
});

t.test("hostile strings reach the embedded engine intact, each in its own column and row", async (t) => {
  const config = validateConfig({ analytics: { engine: "embedded", path: analyticsDir(t) } });
  const analytics = await openAnalytics(config.analytics, { clock: { now: () => Date.now() } });
  t.teardown(() => analytics.close());
  const hostile = [
    '"],["ws_other",1]',
    "tab\there",
    "new\nline",
    "back\\slash",
    "quote'single",
    "nul\u0000byte",
    "ünïcødé 🔑",
    '{"json":true}',
  ];
  const events = hostile.map((text, index) =>
    event({
      requestId: `req_hostile_${index}`,
      workspaceId: "ws_rows",
      externalId: text,
      keyId: `key_${text}`,
      tags: [text, `second ${text}`],
    }),
  );
  for (const each of events) analytics.sinks.verifications.record(each);
  await analytics.flush();

  const engine = analytics.engine;
  if (!engine) throw new Error("the embedded engine is open");
  const rows = await engine.withConnection((connection) =>
    connection.rows("SELECT request_id, workspace_id, external_id, key_id, tags FROM key_verifications_v1 ORDER BY request_id"),
  );
  t.same(
    rows,
    events
      .map((each) => ({
        request_id: each.requestId,
        workspace_id: "ws_rows",
        external_id: each.externalId,
        key_id: each.keyId,
        tags: each.tags,
      }))
      .sort((a, b) => a.request_id.localeCompare(b.request_id)),
    "no value leaked into another column, row or workspace",
  );
  t.match(analytics.stats(), { recorded: hostile.length, written: hostile.length });
});
