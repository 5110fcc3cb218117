import t from "tap";
import { alignToStored, countsFor, estimateUsed, windowEnd, windowSequence } from "../../src/lib/sliding-window.js";

t.test("windows are aligned to the epoch and end where the next begins", async (t) => {
  t.equal(windowSequence(59_999, 60_000), 0);
  t.equal(windowSequence(60_000, 60_000), 1);
  t.equal(windowEnd(1, 60_000), 120_000);
});

t.test("counts roll forward: the current window becomes the previous one, older ones count nothing", async (t) => {
  const stored = { sequence: 7, current: 4, previous: 9 };
  t.same(countsFor(stored, 7), { current: 4, previous: 9 });
  t.same(countsFor(stored, 8), { current: 0, previous: 4 });
  t.same(countsFor(stored, 9), { current: 0, previous: 0 });
  t.same(countsFor(undefined, 7), { current: 0, previous: 0 });
});

t.test("the estimate covers exactly the last duration milliseconds, the previous window spread evenly", async (t) => {
  const d = 1_000;
  const counts = { current: 2, previous: 10 };
  t.equal(estimateUsed(5_000, 5, d, counts), 2 + 9, "at the window's first ms, 999 of the previous window's 1000 ms count");
  t.equal(estimateUsed(5_500, 5, d, counts), 2 + 4, "halfway: floor(10 × 499 / 1000)");
  t.equal(estimateUsed(5_999, 5, d, counts), 2, "at the last ms the previous window no longer counts");
});

t.test("a clock that reads before a stored window is moved to that window's start", async (t) => {
  t.same(alignToStored(4_500, 1_000, { sequence: 6, current: 1, previous: 0 }), { sequence: 6, at: 6_000 });
  t.same(alignToStored(6_500, 1_000, { sequence: 6, current: 1, previous: 0 }), { sequence: 6, at: 6_500 });
  t.same(alignToStored(6_500, 1_000, undefined), { sequence: 6, at: 6_500 });
});
