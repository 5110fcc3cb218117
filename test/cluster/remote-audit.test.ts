import t from "tap";
import { PipelineAuditLog } from "../../src/analytics/audit-log.js";
import { disabledAnalytics } from "../../src/analytics/index.js";
import { Channel, type Message } from "../../src/cluster/channel.js";
import { recordHandedOver, remoteAnalytics } from "../../src/cluster/remote-analytics.js";
import { answerWorker } from "../../src/cluster/worker-questions.js";
import type { AuditEntry } from "../../src/domain/audit/audit-trail.js";
import { auditId } from "../../src/domain/audit/audit-trail.js";

/**
 * A worker's audit log: entries go to the primary's log as they are made, and admission and listings are the
 * primary's. The two sides are joined by plain function calls where processes use IPC.
 */
function link(primaryAudit = disabledAnalytics().audit) {
  const primary = { ...disabledAnalytics(), audit: primaryAudit };
  const sides: { worker?: Channel; primary?: Channel } = {};
  sides.worker = new Channel(
    (message) => sides.primary?.receive(message),
    async () => undefined,
  );
  sides.primary = new Channel(
    (message) => sides.worker?.receive(message),
    (question) => answerWorker(question, undefined, primary, async () => ""),
  );
  const send = (message: Message, done: () => void) => {
    if (message.keygate !== "events") throw new Error(`only events are sent this way, not ${message.keygate}`);
    recordHandedOver(primary, message);
    done();
  };
  return { worker: remoteAnalytics(sides.worker, send), primary };
}

const entry = (workspaceId: string, description: string): AuditEntry => ({
  id: auditId(Date.now()),
  time: Date.now(),
  workspaceId,
  actor: { type: "root_key", id: "key_w", name: "" },
  action: "key.update",
  description,
  resources: [],
  changes: [],
  requestId: "req_w",
  clientAddress: "10.0.0.1",
  userAgent: "",
});

t.test("entries from two workers land in the primary's log, which answers either worker's listing", async (t) => {
  const primaryAudit = disabledAnalytics().audit;
  const one = link(primaryAudit);
  const two = link(primaryAudit);
  await one.worker.audit.admit();
  one.worker.audit.record(entry("ws_a", "from worker one"));
  two.worker.audit.record(entry("ws_a", "from worker two"));
  two.worker.audit.record(entry("ws_b", "elsewhere"));
  const listed = await two.worker.audit.list({ workspaceId: "ws_a", limit: 10 });
  t.same(
    listed.map((e) => e.description),
    ["from worker two", "from worker one"],
  );
  t.match(one.worker.audit.describe(), /primary/);
});

t.test("a worker's write is refused when the primary's log cannot take its entry", async (t) => {
  const full = new PipelineAuditLog(
    { record: () => {}, isFull: () => true, flush: async () => {}, stats: () => ({ recorded: 0, written: 0 }) },
    { database: "keygate", withConnection: () => Promise.reject(new Error("unused")) },
  );
  const { worker } = link(full);
  await t.rejects(worker.audit.admit(), { code: "err:keygate:data:audit_log_unavailable" });
});

t.test("a worker's write is answered once the primary's log has its entry durably, and not when it cannot", async (t) => {
  const primaryAudit = disabledAnalytics().audit;
  let durable: "yes" | "no" = "yes";
  const asked: string[] = [];
  const { worker } = link({
    record: (recorded) => primaryAudit.record(recorded),
    admit: () => primaryAudit.admit(),
    list: (query) => primaryAudit.list(query),
    describe: () => primaryAudit.describe(),
    settled: async () => {
      asked.push("settled");
      if (durable === "no") throw new Error("the journal's disk is full");
    },
  });
  worker.audit.record(entry("ws_a", "durable"));
  await worker.audit.settled();
  t.same(asked, ["settled"], "asked of the primary");
  durable = "no";
  await t.rejects(worker.audit.settled(), { code: "err:keygate:data:audit_log_unavailable", message: /was made/ });
});
