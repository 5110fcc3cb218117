import { appendFileSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t, { type Test } from "tap";
import { AuditJournal } from "../../src/analytics/audit-journal.js";
import { auditOutboxContract } from "../storage/audit-outbox-contract.js";

/**
 * The embedded engine's audit journal: the outbox contract, and what a new process finds in the directory the last
 * one left: every entry not yet removed, a segment gone once all its entries are, a line a crash cut short skipped.
 */

function directory(t: Test): string {
  const path = mkdtempSync(join(tmpdir(), "keygate-journal-"));
  t.teardown(() => rmSync(path, { recursive: true, force: true }));
  return path;
}

const record = (n: number) => JSON.stringify({ id: `audit_${n}` });

t.test("the journal meets the audit outbox contract", (t) =>
  auditOutboxContract(t, async (t) => {
    const journal = await AuditJournal.open(join(directory(t), "journal"));
    t.teardown(() => journal.close());
    return journal;
  }),
);

t.test("a journal opened again holds every entry of a segment not wholly removed, in order", async (t) => {
  const path = directory(t);
  const first = await AuditJournal.open(path);
  await first.append([record(1), record(2)]);
  const read = await first.peek(10);
  await first.append([record(3)]);
  await first.remove([read[0]?.handle as string]);
  // No close: the process is gone as after a kill -9; what append() acknowledged is on disk.
  const second = await AuditJournal.open(path);
  t.teardown(() => second.close());
  t.same(
    (await second.peek(10)).map((item) => item.record),
    [record(1), record(2), record(3)],
    "a segment is deleted whole: an entry removed from one that still held another is read again (the reads count it once)",
  );
  await second.remove((await second.peek(10)).map((item) => item.handle));
  t.same(readdirSync(path), [], "every segment is deleted once the engine has its entries");
  const third = await AuditJournal.open(path);
  t.same(await third.peek(10), [], "and nothing comes back");
});

t.test("a line a crash cut short is skipped; the whole ones before it are kept", async (t) => {
  const path = directory(t);
  const first = await AuditJournal.open(path);
  await first.append([record(1)]);
  await first.close();
  const [segment] = readdirSync(path);
  appendFileSync(join(path, segment as string), '{"id":"audit_2","descr');
  const second = await AuditJournal.open(path);
  t.teardown(() => second.close());
  t.same(
    (await second.peek(10)).map((item) => item.record),
    [record(1)],
  );
  await second.append([record(3)]);
  t.same(
    (await second.peek(10)).map((item) => item.record),
    [record(1), record(3)],
    "appends go to a new segment, never after the cut line",
  );
});
