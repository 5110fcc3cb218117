import t from "tap";
import type { CallDecision, CounterCall } from "../../../src/storage/counter-interfaces.js";
import { StoreClock } from "../../../src/storage/ratelimit/store-clock.js";
import { ManualClock } from "../../helpers/clock.js";

/** A store whose clock runs `aheadMs` ahead of `clock`, and whose answer takes `travelMs` to arrive. */
function remoteStore(clock: ManualClock, aheadMs: number, travelMs: number) {
  return {
    applyBatch: async (_workspaceId: string, calls: readonly CounterCall[], now?: number): Promise<CallDecision[]> => {
      clock.advance(travelMs);
      const decidedAt = now ?? clock.now() + aheadMs;
      clock.advance(travelMs);
      return calls.map(() => ({ outcome: { passed: true, results: [], now: decidedAt }, windows: [] }));
    },
  };
}

t.test("before the store has answered on its own time, only a caller's time is known", async (t) => {
  const storeClock = new StoreClock(new ManualClock(10_000));
  t.equal(storeClock.at(undefined), undefined);
  t.equal(storeClock.at(1_234), 1_234, "a caller's time is always the time");
});

t.test("the store's time is the local clock plus the offset at the last answer, which errs towards the future", async (t) => {
  const clock = new ManualClock(10_000);
  const storeClock = new StoreClock(clock);
  const store = storeClock.measuring(remoteStore(clock, 1_000, 5));
  await store.applyBatch("ws_a", [{ checks: [] }]);
  const estimate = storeClock.at(undefined) as number;
  const trueTime = clock.now() + 1_000;
  t.ok(estimate >= trueTime, `estimated ${estimate}, at or after the store's ${trueTime}`);
  t.equal(estimate, trueTime + 5, "by at most the time the answer took to come back");
  clock.advance(60_000);
  t.equal(storeClock.at(undefined), estimate + 60_000, "and moves with the local clock");
  t.equal(storeClock.at(7), 7, "a caller's time still wins");
});

t.test("answers decided at a caller's time leave the estimate alone", async (t) => {
  const clock = new ManualClock(10_000);
  const storeClock = new StoreClock(clock);
  const store = storeClock.measuring(remoteStore(clock, 1_000, 0));
  await store.applyBatch("ws_a", [{ checks: [] }], 99);
  t.equal(storeClock.at(undefined), undefined);
  await store.applyBatch("ws_a", [{ checks: [] }]);
  await store.applyBatch("ws_a", [{ checks: [] }], 99);
  t.equal(storeClock.at(undefined), clock.now() + 1_000);
});
