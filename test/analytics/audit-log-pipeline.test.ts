import t from "tap";
import { EventList } from "../../src/analytics/analytics-engine.js";
import { auditLogSelect, MemoryAuditLog, PipelineAuditLog } from "../../src/analytics/audit-log.js";
import { disabledAnalytics } from "../../src/analytics/index.js";
import { EventPipeline, type Scheduler } from "../../src/analytics/pipeline.js";
import { AUDIT_LOGS } from "../../src/analytics/rows.js";
import type { AnalyticsQueryEngine } from "../../src/domain/analytics/query-engine.js";
import { type AuditEntry, auditId, changesOf, removed, UNAUDITED } from "../../src/domain/audit/audit-trail.js";
import { assertError } from "../helpers/assertions.js";
import { auditEntry } from "../helpers/audit-entries.js";
import { ManualClock } from "../helpers/clock.js";
import { harness, WORKSPACE } from "../helpers/harness.js";

/**
 * The audit log is never dropped: its pipeline keeps every entry beyond the buffer and retries a failed batch
 * for as long as it takes, and a write asks for room first: with the buffer full and the engine not taking writes,
 * the write is refused with 503 audit_log_unavailable before anything changes. Closing writes what is held.
 */

const noTimers: Scheduler = { every: () => () => {}, soon: (task) => void setImmediate(task) };

/** An audit pipeline over a fake engine that takes writes only while `up`. */
function auditPipeline(maxEvents: number) {
  const state = { up: false, written: [] as AuditEntry[], attempts: 0 };
  const pipeline = new EventPipeline<AuditEntry, EventList<AuditEntry>>(
    {
      create: () => new EventList(AUDIT_LOGS, "test"),
      write: async (batch) => {
        state.attempts++;
        if (!state.up) throw new Error("engine down");
        state.written.push(...batch.events);
      },
      release: () => {},
    },
    { maxEvents, batchSize: maxEvents, flushIntervalMs: 1_000, maxWriteAttempts: Number.POSITIVE_INFINITY, keepWhenFull: true },
    { scheduler: noTimers, clock: new ManualClock() },
  );
  return { pipeline, state };
}

const engine: AnalyticsQueryEngine = { database: "keygate", withConnection: async () => Promise.reject(new Error("not read here")) };

t.test("a full audit pipeline keeps every entry, refuses admission while the engine is down, and drains once it is up", async (t) => {
  const { pipeline, state } = auditPipeline(2);
  const log = new PipelineAuditLog(pipeline, engine);
  await log.admit();
  for (const n of [1, 2, 3]) log.record(auditEntry(n));
  t.match(pipeline.stats(), { buffered: 3, dropped: { bufferFull: 0, writeFailed: 0 } }, "kept beyond maxEvents");
  await t.rejects(log.admit(), { code: "err:keygate:data:audit_log_unavailable" });
  for (let attempt = 0; attempt < 15; attempt++) await pipeline.flush();
  t.ok(state.attempts > 10, "a failing batch is retried past the analytics tables' limit");
  t.match(pipeline.stats(), { buffered: 3, dropped: { writeFailed: 0 } }, "and never given up");
  state.up = true;
  await log.admit();
  t.same(
    state.written.map((e) => e.description),
    ["entry 1", "entry 2", "entry 3"],
    "admission waited for the flush, which wrote everything",
  );
  log.record(auditEntry(4));
  await pipeline.close();
  t.same(state.written.at(-1)?.description, "entry 4", "closing writes what is held");
  t.match(log.describe(), /audit_logs_v1/);
});

t.test("a write whose entry cannot be kept is refused before anything changes", async (t) => {
  const { pipeline, state } = auditPipeline(1);
  const log = new PipelineAuditLog(pipeline, engine);
  const h = await harness(t, { analytics: { ...disabledAnalytics(), audit: log } });
  log.record(auditEntry(1));
  const refused = await h.call("apis.createApi", { name: "unaudited" });
  assertError(t, refused, "err:keygate:data:audit_log_unavailable");
  t.same(await h.app.stores.apis.list(WORKSPACE), [], "the API was not created");
  const read = await h.call("keygate.listApis", {});
  t.equal(read.status, 200, "reads are not held back");
  state.up = true;
  const created = await h.call("apis.createApi", { name: "audited" });
  t.equal(created.status, 200);
  await pipeline.flush();
  t.same(
    state.written.map((e) => e.action),
    ["api.create", "api.create"],
  );
  t.equal(state.written[1]?.resources[0]?.id, created.body.data.apiId);
});

t.test("with analytics off the log is in memory, the most recent entries, bounded", async (t) => {
  const log = new MemoryAuditLog(3);
  await log.admit();
  for (const n of [1, 2, 3, 4, 5]) log.record(auditEntry(n));
  const listed = await log.list({ workspaceId: WORKSPACE, limit: 10 });
  t.same(
    listed.map((e) => e.description),
    ["entry 5", "entry 4", "entry 3"],
  );
  t.match(log.describe(), /in memory only, the last 3 entries/);
  t.same(await log.list({ workspaceId: WORKSPACE, limit: 10, resourceType: "api", resourceId: "api_4" }), [listed[1]]);
  t.same(await log.list({ workspaceId: WORKSPACE, limit: 10, before: { time: listed[1]?.time as number, id: listed[1]?.id as string } }), [
    listed[2],
  ]);
});

t.test("the SELECT binds every value and pages by (time, id)", async (t) => {
  const { sql, params } = auditLogSelect("keygate", {
    workspaceId: WORKSPACE,
    limit: 11,
    resourceId: "key_1",
    before: { time: 5, id: "audit_x" },
  });
  t.match(sql, /has\(resource_ids, \{resourceId:String\}\)/);
  t.match(sql, /ORDER BY time DESC, audit_id DESC LIMIT 1 BY audit_id LIMIT 11/, "an entry written twice (a retried batch) is one row");
  t.same(params, { workspaceId: WORKSPACE, resourceId: "key_1", beforeTime: "5", beforeId: "audit_x" });
  t.notOk(sql.includes("key_1"), "values never become SQL text");
});

t.test("changes: only differing fields, absent as null; the unaudited trail records nothing", async (t) => {
  t.same(changesOf({ a: 1, b: [1] }, { a: 1, b: [2], c: undefined }, ["a", "b", "c"]), [{ field: "b", old: [1], new: [2] }]);
  t.same(removed({ name: "x" }), [{ field: "name", old: "x", new: null }]);
  await UNAUDITED.admit();
  UNAUDITED.recordSystem(WORKSPACE, { action: "config.reload", description: "", resources: [] });
  UNAUDITED.recordAs(
    WORKSPACE,
    { type: "system", id: "", name: "" },
    { requestId: "", clientAddress: "", userAgent: "" },
    {
      action: "config.reload",
      description: "",
      resources: [],
    },
  );
  const earlier = auditId(1);
  t.ok(earlier < auditId(1), "ids made later sort later, within one millisecond too");
});
