import t from "tap";
import { MemoryRatelimitCounterStore } from "../../../src/storage/memory/ratelimit-counter-store.js";
import { CallBatcher } from "../../../src/storage/ratelimit/call-batcher.js";
import { ManualClock } from "../../helpers/clock.js";
import { RecordingStore } from "./recording-store.js";

const check = (bucket: string, limit: number, cost = 1) => ({ bucket, limit, durationMs: 60_000, cost });

t.test("calls made in one turn go to the store together, one batch per workspace and time, in order", async (t) => {
  const store = new RecordingStore(new MemoryRatelimitCounterStore(new ManualClock()));
  const batcher = new CallBatcher(store, 1_000);
  const now = 1_000 * 60_000;
  const decisions = await Promise.all([
    batcher.decide("ws_a", { checks: [check("shared", 3, 2)] }, now),
    batcher.decide("ws_a", { checks: [check("shared", 3, 2)] }, now),
    batcher.decide("ws_b", { checks: [check("shared", 3, 2)] }, now),
    batcher.decide("ws_a", { checks: [check("shared", 3, 1)] }, now),
    batcher.decide("ws_a", { checks: [check("shared", 3, 0)] }, now + 1),
  ]);
  t.same(
    decisions.map(({ outcome }) => [outcome.passed, outcome.results[0]?.remaining]),
    [
      [true, 1],
      [false, 1],
      [true, 1],
      [true, 0],
      [true, 0],
    ],
    "each call decided as if alone, in the order made",
  );
  t.same(
    store.batches.map((batch) => [batch.workspaceId, batch.now, batch.calls.length]),
    [
      ["ws_a", now, 3],
      ["ws_b", now, 1],
      ["ws_a", now + 1, 1],
    ],
  );

  await batcher.decide("ws_a", { checks: [check("later", 3)] }, now);
  t.equal(store.batches.length, 4, "a call of a later turn goes in a batch of its own");
});

t.test("a batch uses at most maxKeysPerBatch keys, checks and credit checks alike", async (t) => {
  const store = new RecordingStore(new MemoryRatelimitCounterStore(new ManualClock()));
  const batcher = new CallBatcher(store, 10);
  const wide = Array.from({ length: 4 }, (_, i) => check(`wide-${i}`, 100));
  const decisions = await Promise.all(Array.from({ length: 7 }, () => batcher.decide("ws_a", { checks: wide }, 0)));
  t.same([...new Set(decisions.map(({ outcome }) => outcome.passed))], [true], "every call answered");
  t.same(
    store.batches.map((batch) => batch.calls.length),
    [2, 2, 2, 1],
    "4 keys a call: 2 calls a batch",
  );
  t.equal(decisions.at(-1)?.outcome.results[0]?.remaining, 100 - 7, "each call applied once");

  const lone = await Promise.all([batcher.decide("ws_a", { checks: Array.from({ length: 12 }, (_, i) => check(`big-${i}`, 5)) }, 0)]);
  t.equal(lone[0]?.outcome.passed, true, "a call bigger than a batch still goes, alone");
});

t.test("a batch that fails fails its own calls only", async (t) => {
  const memory = new MemoryRatelimitCounterStore(new ManualClock());
  const failing = new Error("no answer");
  const batcher = new CallBatcher(
    {
      applyBatch: (workspaceId, calls, now) =>
        workspaceId === "ws_down" ? Promise.reject(failing) : memory.applyBatch(workspaceId, calls, now),
    },
    1_000,
  );
  const settled = await Promise.allSettled([
    batcher.decide("ws_down", { checks: [check("a", 5)] }, 0),
    batcher.decide("ws_up", { checks: [check("a", 5)] }, 0),
    batcher.decide("ws_down", { checks: [check("b", 5)] }, 0),
  ]);
  t.same(
    settled.map((result) => result.status),
    ["rejected", "fulfilled", "rejected"],
  );
  t.equal((settled[0] as PromiseRejectedResult).reason, failing, "with the store's error");
});
