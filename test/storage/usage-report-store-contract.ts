import type { Test } from "tap";
import type { Stores } from "../../src/storage/interfaces.js";
import type { UsageReportCommit } from "../../src/storage/usage-report-interfaces.js";

const HOUR = 3_600_000;

/** The usage report store, as every Stores implementation must keep it (run from contract.ts). */
export async function usageReportStoreContract(t: Test, open: (t: Test) => Promise<Stores>): Promise<void> {
  await t.test("usage reports: one producer's lease at a time, judged by the time passed in", async (t) => {
    const { usageReports } = await open(t);
    t.equal(await usageReports.lease("a", 1_000, 60_000), true, "free: taken");
    t.equal(await usageReports.lease("b", 30_000, 60_000), false, "held by another until its time is up");
    t.equal(await usageReports.lease("a", 50_000, 60_000), true, "the holder extends it");
    t.equal(await usageReports.lease("b", 100_000, 60_000), false, "extended: still a's at 100 s");
    t.equal(await usageReports.lease("b", 110_000, 60_000), true, "up: another takes it");
    await usageReports.release("a");
    t.equal(await usageReports.lease("a", 120_000, 60_000), false, "releasing what one does not hold changes nothing");
    await usageReports.release("b");
    t.equal(await usageReports.lease("a", 120_000, 60_000), true, "released by its holder: free");
  });

  await t.test("usage reports: progress moves only from where it is, and only for the lease's holder", async (t) => {
    const { usageReports } = await open(t);
    const commit = (change: Partial<UsageReportCommit>): Promise<boolean> =>
      usageReports.commit({ owner: "a", now: 2_000, endpointId: "wh_1", from: null, to: HOUR, reported: [], keepMs: 24 * HOUR, ...change });
    t.equal(await usageReports.progress("wh_1"), null, "nothing reported yet");
    t.equal(await commit({}), false, "without the lease: refused");
    await usageReports.lease("a", 1_000, 60_000);
    t.equal(await commit({ now: 61_000 }), false, "with a lease whose time is up: refused");
    t.equal(await commit({ from: 0 }), false, "from a progress it does not have: refused");
    t.equal(await usageReports.progress("wh_1"), null, "a refused commit writes nothing");

    t.equal(
      await commit({ reported: [{ periodStart: 0, subjects: { id_1: '{"requests":3}', key_2: '{"requests":1}' } }] }),
      true,
      "the holder moves it from where it is",
    );
    t.equal(await usageReports.progress("wh_1"), HOUR);
    t.same(await usageReports.reported("wh_1", 0), { id_1: '{"requests":3}', key_2: '{"requests":1}' }, "what the period reported is kept");
    t.equal(await commit({ to: 2 * HOUR }), false, "the same period again (from where it was): refused");
    t.equal(await usageReports.progress("wh_1"), HOUR, "and the progress stays");
    t.same(await usageReports.progress("wh_2"), null, "each endpoint has its own");

    t.equal(
      await commit({
        from: HOUR,
        to: 2 * HOUR,
        reported: [
          { periodStart: HOUR, subjects: { id_1: '{"requests":5}' } },
          { periodStart: 0, subjects: { id_1: '{"requests":4}' } },
        ],
      }),
      true,
      "the next period, with a correction of the one before",
    );
    t.same(await usageReports.reported("wh_1", HOUR), { id_1: '{"requests":5}' });
    t.same(
      await usageReports.reported("wh_1", 0),
      { id_1: '{"requests":4}', key_2: '{"requests":1}' },
      "a correction replaces its subject and keeps the others",
    );
    t.same(await usageReports.reported("wh_1", 5 * HOUR), {}, "a period never reported: nothing");

    await usageReports.lease("b", 70_000, 60_000);
    t.equal(
      await usageReports.commit({ owner: "a", now: 70_000, endpointId: "wh_1", from: 2 * HOUR, to: 3 * HOUR, reported: [], keepMs: HOUR }),
      false,
      "a producer that lost its lease cannot move an endpoint on",
    );
    t.equal(await usageReports.progress("wh_1"), 2 * HOUR);
  });

  await t.test("usage reports: concurrent commits of one period, one wins", async (t) => {
    const { usageReports } = await open(t);
    await usageReports.lease("a", 0, 60_000);
    const results = await Promise.all(
      Array.from({ length: 10 }, () =>
        usageReports.commit({ owner: "a", now: 1, endpointId: "wh_c", from: null, to: HOUR, reported: [], keepMs: HOUR }),
      ),
    );
    t.equal(results.filter(Boolean).length, 1);
  });
}
