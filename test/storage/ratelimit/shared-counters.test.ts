import t from "tap";
import { MemoryRatelimitCounterStore } from "../../../src/storage/memory/ratelimit-counter-store.js";
import { SharedCounters } from "../../../src/storage/ratelimit/shared-counters.js";
import { ManualClock } from "../../helpers/clock.js";
import { RecordingStore } from "./recording-store.js";

const busy = { bucket: "busy", limit: 10_000, durationMs: 60_000, cost: 1 };

function setUp(reservations = true) {
  const clock = new ManualClock(1_000 * 60_000);
  const store = new RecordingStore(new MemoryRatelimitCounterStore(clock));
  return { clock, store, counters: new SharedCounters(store, clock, { reservations, maxKeysPerBatch: 1_000 }) };
}

t.test("a busy counter answers exactly, and most calls are admitted from reserved units without the store", async (t) => {
  const { store, counters } = setUp();
  const remaining: number[] = [];
  for (let i = 0; i < 200; i++) remaining.push((await counters.applyChecks("ws_a", [busy])).results[0]?.remaining as number);
  t.same(
    remaining,
    Array.from({ length: 200 }, (_, i) => 10_000 - i - 1),
  );
  t.ok(store.calls <= 10, `${store.calls} of 200 calls reached the store`);
  const inStore = await store.applyBatch("ws_a", [{ checks: [{ ...busy, cost: 0 }] }]);
  t.ok((inStore[0]?.outcome.results[0]?.remaining as number) < 10_000 - 200, "the units held here are counted in the store");
});

t.test("with reservations off, every call is decided by the store and nothing is held back", async (t) => {
  const { store, counters } = setUp(false);
  for (let i = 0; i < 50; i++) await counters.applyChecks("ws_a", [busy]);
  t.equal(store.calls, 50);
  const inStore = await store.applyBatch("ws_a", [{ checks: [{ ...busy, cost: 0 }] }]);
  t.equal(inStore[0]?.outcome.results[0]?.remaining, 10_000 - 50);
});

t.test("a window known exhausted is denied without the store, exactly as the store denied it", async (t) => {
  const { clock, store, counters } = setUp();
  const small = { bucket: "small", limit: 3, durationMs: 60_000, cost: 1 };
  for (let i = 0; i < 3; i++) await counters.applyChecks("ws_a", [small]);
  const byStore = await counters.applyChecks("ws_a", [small]);
  const calls = store.calls;
  const here = await counters.applyChecks("ws_a", [small]);
  t.same(here, byStore, "the same answer");
  t.equal(store.calls, calls, "the store was not asked");
  clock.advance(60_000 + 30_000);
  t.equal((await counters.applyChecks("ws_a", [small])).passed, true, "halfway through the next window the store admits again");
  t.equal(store.calls, calls + 1);
});

t.test("forget() sends every call to the store again", async (t) => {
  const { store, counters } = setUp();
  const small = { bucket: "small", limit: 1, durationMs: 60_000, cost: 1 };
  await counters.applyChecks("ws_a", [small]);
  await counters.applyChecks("ws_a", [busy]);
  await counters.applyChecks("ws_a", [busy]);
  const calls = store.calls;
  counters.forget();
  await counters.applyChecks("ws_a", [small]);
  await counters.applyChecks("ws_a", [busy]);
  t.equal(store.calls, calls + 2, "neither the exhausted window nor the reserved units are used");
});

t.test("a call that asked for a reservation and failed lets the next one ask", async (t) => {
  const { store, counters } = setUp();
  await counters.applyChecks("ws_a", [busy]);
  store.failWith = new Error("no answer");
  await t.rejects(counters.applyChecks("ws_a", [busy]), store.failWith);
  store.failWith = undefined;
  await counters.applyChecks("ws_a", [busy]);
  t.same(store.batches.at(-1)?.calls[0]?.reserve, [64], "asked again");
  const calls = store.calls;
  t.equal((await counters.applyChecks("ws_a", [busy])).passed, true);
  t.equal(store.calls, calls, "and admitted from what it got");
});
