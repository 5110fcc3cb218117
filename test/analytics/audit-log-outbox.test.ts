import t from "tap";
import { OutboxAuditLog } from "../../src/analytics/audit-log.js";
import { disabledAnalytics } from "../../src/analytics/index.js";
import type { Scheduler } from "../../src/analytics/pipeline.js";
import type { AnalyticsQueryEngine } from "../../src/domain/analytics/query-engine.js";
import type { AuditEntry } from "../../src/domain/audit/audit-trail.js";
import type { AuditOutbox, AuditOutboxItem } from "../../src/storage/audit-outbox-interfaces.js";
import { assertError } from "../helpers/assertions.js";
import { auditEntry } from "../helpers/audit-entries.js";
import { harness, WORKSPACE } from "../helpers/harness.js";

/**
 * The audit log behind an outbox: a write's entry is in the outbox before settled() resolves, concurrent entries
 * share one append (group commit), a failed append rejects settled() and keeps the entries for the next, and the
 * pump removes an entry from the outbox only once the engine has it.
 */

/** An outbox in memory whose appends wait for `release()` while `held`, and fail while `down`. */
class TestOutbox implements AuditOutbox {
  readonly appends: string[][] = [];
  readonly items: AuditOutboxItem[] = [];
  held = false;
  down = false;
  private next = 0;
  private releases: (() => void)[] = [];

  async append(records: readonly string[]): Promise<void> {
    if (this.held) await new Promise<void>((resolve) => this.releases.push(resolve));
    if (this.down) throw new Error("outbox down");
    this.appends.push([...records]);
    for (const record of records) this.items.push({ handle: String(this.next++), record });
  }

  release(): void {
    this.held = false;
    for (const release of this.releases.splice(0)) release();
  }

  async peek(max: number): Promise<AuditOutboxItem[]> {
    return this.items.slice(0, max);
  }

  async remove(handles: readonly string[]): Promise<void> {
    const gone = new Set(handles);
    this.items.splice(0, this.items.length, ...this.items.filter((item) => !gone.has(item.handle)));
  }

  describe(): string {
    return "in a test";
  }
}

const noTimers: Scheduler = { every: () => () => {}, soon: (task) => void setImmediate(task) };
const engine: AnalyticsQueryEngine = { database: "keygate", withConnection: async () => [] as never };
const descriptions = (records: readonly string[]) => records.map((record) => (JSON.parse(record) as AuditEntry).description);

function outboxLog(outbox: TestOutbox, write: (entries: readonly AuditEntry[]) => Promise<void> = async () => {}) {
  return new OutboxAuditLog({ outbox, engine, write, maxUnsent: 3, batchSize: 2, intervalMs: 1_000, scheduler: noTimers });
}

t.test("concurrent writes share one append, and each is settled once its entry is in the outbox", async (t) => {
  const outbox = new TestOutbox();
  const log = outboxLog(outbox);
  outbox.held = true;
  log.record(auditEntry(1));
  const first = log.settled();
  log.record(auditEntry(2));
  log.record(auditEntry(3));
  const later = log.settled();
  let settled = false;
  void later.then(() => {
    settled = true;
  });
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(settled, false, "not settled while its entries are not in the outbox");
  outbox.release();
  await Promise.all([first, later]);
  t.same(
    outbox.appends.map(descriptions),
    [["entry 1"], ["entry 2", "entry 3"]],
    "the entries recorded during the first append went out together in the next",
  );
  await log.settled();
  t.equal(outbox.appends.length, 2, "nothing new: settled() appends nothing");
});

t.test("a failed append rejects settled() with 503 and keeps the entries for the next one", async (t) => {
  const outbox = new TestOutbox();
  const log = outboxLog(outbox);
  outbox.down = true;
  log.record(auditEntry(1));
  await t.rejects(log.settled(), { code: "err:keygate:data:audit_log_unavailable", message: /was made/ });
  log.record(auditEntry(2));
  await t.rejects(log.settled(), { code: "err:keygate:data:audit_log_unavailable" });
  log.record(auditEntry(3));
  await t.rejects(log.admit(), { code: "err:keygate:data:audit_log_unavailable" }, "a write is refused while maxUnsent wait");
  outbox.down = false;
  await log.settled();
  t.same(outbox.appends.map(descriptions), [["entry 1", "entry 2", "entry 3"]], "every entry, in order, once");
  await log.admit();
});

t.test("the pump writes entries to the engine, then removes them; a failed write leaves them in the outbox", async (t) => {
  const outbox = new TestOutbox();
  const written: string[] = [];
  let engineUp = false;
  const log = outboxLog(outbox, async (entries) => {
    if (!engineUp) throw new Error("engine down");
    written.push(...entries.map((each) => each.description));
  });
  for (const n of [1, 2, 3]) log.record(auditEntry(n));
  await t.rejects(log.flush(), /engine down/);
  t.equal(outbox.items.length, 3, "kept in the outbox");
  engineUp = true;
  await log.flush();
  t.same(written, ["entry 1", "entry 2", "entry 3"], "in batches of batchSize, oldest first");
  t.equal(outbox.items.length, 0, "removed once written");
  t.match(log.describe(), /audit_logs_v1 in the analytics engine; in a test/);
  log.record(auditEntry(4));
  await log.close();
  t.same(written.at(-1), "entry 4", "closing appends and moves what is left");
});

t.test("a write whose entry the outbox does not take is answered 503 saying it was made; once it does, 200", async (t) => {
  const outbox = new TestOutbox();
  const log = outboxLog(outbox);
  const h = await harness(t, { analytics: { ...disabledAnalytics(), audit: log } });
  outbox.down = true;
  const refused = await h.call("apis.createApi", { name: "made-but-unconfirmed" });
  assertError(t, refused, "err:keygate:data:audit_log_unavailable");
  t.match(refused.body.error.detail, /was made/);
  t.same(
    (await h.app.stores.apis.list(WORKSPACE)).map((api) => api.name),
    ["made-but-unconfirmed"],
    "the write itself was made",
  );
  outbox.down = false;
  t.equal((await h.call("apis.createApi", { name: "confirmed" })).status, 200);
  const appended = outbox.appends.flat().map((record) => (JSON.parse(record) as AuditEntry).description);
  t.equal(appended.length, 2, "both entries, each once");
  t.match(appended[0], /made-but-unconfirmed/, "the unconfirmed write's entry was kept and appended first");
  t.match(appended[1], /confirmed/);
});

t.test("the timer moves entries to the engine and says once that it fails, and once that it works again", async (t) => {
  const outbox = new TestOutbox();
  const ticks: (() => void)[] = [];
  const warnings: string[] = [];
  let engineUp = false;
  const log = new OutboxAuditLog({
    outbox,
    engine,
    write: async () => {
      if (!engineUp) throw new Error("engine down");
    },
    maxUnsent: 10,
    batchSize: 10,
    intervalMs: 1_000,
    scheduler: {
      every: (_ms, task) => {
        ticks.push(task);
        return () => {};
      },
      soon: (task) => void setImmediate(task),
    },
    log: { warn: (message) => warnings.push(message) },
  });
  const tick = async () => {
    for (const task of ticks) task();
    // The outbox and the engine here are promises only: every step of a pass has run once the event loop turns.
    await new Promise((resolve) => setImmediate(resolve));
  };
  log.record(auditEntry(1));
  await log.settled();
  await tick();
  await tick();
  t.same(warnings, ["audit log: moving entries to the engine failed: engine down"], "said once");
  t.equal(outbox.items.length, 1, "the entry waits in the outbox");
  engineUp = true;
  await tick();
  t.same(warnings.at(-1), "audit log: moving entries to the engine works again");
  t.equal(outbox.items.length, 0, "moved");
});
