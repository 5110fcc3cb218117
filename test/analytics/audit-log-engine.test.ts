import t from "tap";
import { EMBEDDED_DATABASE } from "../../src/analytics/index.js";
import { analyticsDir } from "../helpers/analytics.js";
import { ManualClock } from "../helpers/clock.js";
import { harness, OTHER_ROOT_KEY } from "../helpers/harness.js";

/**
 * The audit log in the embedded engine: audit_logs_v1 with its TTL from analytics.retentionDays.audit, read back by
 * keygate.listAuditLogs with every filter and the cursor, confined to the caller's workspace. Entries are dated by
 * keygate's (manual) clock, so an entry made "400 days ago" is past a 30-day retention: the engine drops it.
 */

const DAY_MS = 86_400_000;

t.test("audit_logs_v1: stored, filtered, paged, confined and expired by its TTL", async (t) => {
  const now = Date.now();
  const clock = new ManualClock(now - 400 * DAY_MS);
  const h = await harness(t, {
    clock,
    config: {
      analytics: { engine: "embedded", path: analyticsDir(t), retentionDays: { audit: 30 }, buffer: { flushIntervalMs: 600_000 } },
    },
  });
  const old = await h.call("apis.createApi", { name: "ancient" });
  t.equal(old.status, 200);
  clock.advance(400 * DAY_MS);
  const apiId = (await h.call("apis.createApi", { name: "recent" })).body.data.apiId as string;
  const key = await h.call("keys.createKey", { apiId, name: "first" });
  await h.call("keys.updateKey", { keyId: key.body.data.keyId, name: "second" });
  await h.call("keys.deleteKey", { keyId: key.body.data.keyId });

  const ddl = await h.app.analytics.engine?.withConnection((c) => c.text(`SHOW CREATE TABLE ${EMBEDDED_DATABASE}.audit_logs_v1`));
  t.match(ddl, /TTL toDateTime\(intDiv\(time, 1000\), 'UTC'\) \+ toIntervalDay\(30\)/, "the TTL is the configured retention");

  // A merge applies the TTL (the engine may also drop an expired part as soon as it is written).
  await h.app.analytics.flush();
  await h.app.analytics.engine?.withConnection((c) => c.text(`OPTIMIZE TABLE ${EMBEDDED_DATABASE}.audit_logs_v1 FINAL`));
  const all = await h.call("keygate.listAuditLogs", {});
  t.equal(all.status, 200, JSON.stringify(all.body.error ?? ""));
  t.same(
    all.body.data.map((entry: { action: string }) => entry.action),
    ["key.delete", "key.update", "key.create", "api.create"],
    "newest first; the entry dated 400 days back is past its 30-day retention, dropped by the TTL",
  );
  t.notOk(
    all.body.data.some((entry: { description: string }) => entry.description.includes("ancient")),
    "past its retention",
  );
  t.match(all.body.data[1], {
    actor: { type: "root_key", id: "config_root_key_0", name: "" },
    resources: [
      { type: "key", id: key.body.data.keyId },
      { type: "api", id: apiId },
    ],
    changes: [{ field: "name", old: "first", new: "second" }],
    context: { clientAddress: "127.0.0.1" },
  });
  t.equal(all.body.data[1].context.requestId.startsWith("req_"), true);

  const ofKey = await h.call("keygate.listAuditLogs", { resourceType: "key", resourceId: key.body.data.keyId });
  t.equal(ofKey.body.data.length, 3, "resource type and id together");
  t.equal((await h.call("keygate.listAuditLogs", { resourceType: "api", resourceId: key.body.data.keyId })).body.data.length, 0);
  t.equal((await h.call("keygate.listAuditLogs", { resourceType: "api" })).body.data.length, 4);
  t.equal((await h.call("keygate.listAuditLogs", { resourceId: apiId })).body.data.length, 4);
  t.equal((await h.call("keygate.listAuditLogs", { action: "api.create" })).body.data.length, 1);
  t.equal((await h.call("keygate.listAuditLogs", { actorType: "root_key", actorId: "config_root_key_0" })).body.data.length, 4);
  t.equal((await h.call("keygate.listAuditLogs", { actorId: "key_nobody" })).body.data.length, 0);
  t.equal((await h.call("keygate.listAuditLogs", { start: now - DAY_MS })).body.data.length, 4);
  t.equal((await h.call("keygate.listAuditLogs", { end: now - DAY_MS })).body.data.length, 0);
  t.equal((await h.call("keygate.listAuditLogs", { end: now })).body.data.length, 4);

  const first = await h.call("keygate.listAuditLogs", { limit: 2 });
  t.equal(first.body.pagination.hasMore, true);
  const second = await h.call("keygate.listAuditLogs", { limit: 2, cursor: first.body.pagination.cursor });
  t.same(
    [...first.body.data, ...second.body.data].map((entry: { auditLogId: string }) => entry.auditLogId),
    all.body.data.map((entry: { auditLogId: string }) => entry.auditLogId),
    "the cursor pages through, without repeats",
  );
  t.equal(second.body.pagination.hasMore, false);

  t.same((await h.call("keygate.listAuditLogs", {}, { rootKey: OTHER_ROOT_KEY })).body.data, [], "another workspace sees nothing");

  // Listing flushes this instance's pipeline first: its own writes are there at once.
  await h.call("apis.createApi", { name: "latest" });
  t.equal((await h.call("keygate.listAuditLogs", { limit: 1 })).body.data[0].description.includes("latest"), true);
});

t.test("an entry the engine got twice (a pump retried after a crash) is listed once, and pages stay exact", async (t) => {
  const h = await harness(t, { config: { analytics: { engine: "embedded", path: analyticsDir(t) } } });
  for (const name of ["one", "two", "three"]) t.equal((await h.call("apis.createApi", { name })).status, 200);
  await h.app.analytics.flush();
  await h.app.analytics.engine?.withConnection((c) =>
    c.text(`INSERT INTO ${EMBEDDED_DATABASE}.audit_logs_v1 SELECT * FROM ${EMBEDDED_DATABASE}.audit_logs_v1`),
  );
  const rows = await h.app.analytics.engine?.withConnection((c) => c.rows(`SELECT count() AS n FROM ${EMBEDDED_DATABASE}.audit_logs_v1`));
  t.equal(Number(rows?.[0]?.n), 6, "every row is there twice");
  const all = await h.call("keygate.listAuditLogs", {});
  t.same(
    all.body.data.map((entry: { description: string }) => entry.description.match(/\((\w+)\)$/)?.[1]),
    ["three", "two", "one"],
  );
  const first = await h.call("keygate.listAuditLogs", { limit: 2 });
  const second = await h.call("keygate.listAuditLogs", { limit: 2, cursor: first.body.pagination.cursor });
  t.same(
    [...first.body.data, ...second.body.data].map((entry: { auditLogId: string }) => entry.auditLogId),
    all.body.data.map((entry: { auditLogId: string }) => entry.auditLogId),
    "the cursor pages through once each",
  );
});
