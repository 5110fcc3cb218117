import type { Test } from "tap";
import type { AuditOutbox } from "../../src/storage/audit-outbox-interfaces.js";

const record = (n: number) => JSON.stringify({ id: `audit_${n}`, description: `entry ${n}` });

/**
 * The audit outbox as every implementation must keep it: the Redis stream (run from contract.ts for every Redis
 * topology) and the embedded engine's journal (audit-journal.test.ts).
 */
export async function auditOutboxContract(t: Test, open: (t: Test) => Promise<AuditOutbox>): Promise<void> {
  await t.test("audit outbox: entries come back oldest first, across appends, until removed", async (t) => {
    const outbox = await open(t);
    t.same(await outbox.peek(10), [], "empty at first");
    await outbox.append([record(1), record(2)]);
    await outbox.append([]);
    await outbox.append([record(3)]);
    const all = await outbox.peek(10);
    t.same(
      all.map((item) => item.record),
      [record(1), record(2), record(3)],
    );
    t.equal(new Set(all.map((item) => item.handle)).size, 3, "each entry has a handle of its own");
    t.same(
      (await outbox.peek(2)).map((item) => item.record),
      [record(1), record(2)],
      "at most max, the oldest",
    );
    await outbox.append([record(4)]);
    await outbox.remove([all[0]?.handle as string, all[1]?.handle as string]);
    t.same(
      (await outbox.peek(10)).map((item) => item.record),
      [record(3), record(4)],
      "removed entries are gone; one appended after a read is kept",
    );
    await outbox.remove([all[0]?.handle as string]);
    t.same((await outbox.peek(10)).length, 2, "removing a handle twice changes nothing");
    await outbox.remove((await outbox.peek(10)).map((item) => item.handle));
    t.same(await outbox.peek(10), [], "empty once everything is removed");
    t.type(outbox.describe(), "string");
  });

  await t.test("audit outbox: concurrent appends keep every entry, each group in its order", async (t) => {
    const outbox = await open(t);
    await Promise.all(Array.from({ length: 20 }, (_, group) => outbox.append([record(group * 10), record(group * 10 + 1)])));
    const records = (await outbox.peek(100)).map((item) => item.record);
    t.equal(records.length, 40);
    for (let group = 0; group < 20; group++) {
      t.ok(records.indexOf(record(group * 10)) < records.indexOf(record(group * 10 + 1)), `group ${group} in order`);
    }
  });
}
