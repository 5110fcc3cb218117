import t from "tap";
import { createMemoryStores } from "../../src/storage/index.js";
import { MemoryRatelimitCounterStore } from "../../src/storage/memory/ratelimit-counter-store.js";
import { ManualClock } from "../helpers/clock.js";
import { storeContract } from "./contract.js";

t.test("in-memory stores meet the store contract", (t) => storeContract(t, async () => createMemoryStores()));

t.test("in-memory counters forget windows that have ended, at most once a minute", async (t) => {
  const clock = new ManualClock(0);
  const counters = new MemoryRatelimitCounterStore(clock);
  const check = { bucket: "b", limit: 5, durationMs: 1_000, cost: 1 };
  for (let i = 0; i < 3; i++) await counters.applyChecks("ws_a", [{ ...check, bucket: `b${i}` }]);
  t.equal(counters.size, 3);
  clock.advance(59_999);
  await counters.applyChecks("ws_a", [{ ...check, bucket: "late" }]);
  t.equal(counters.size, 4, "no sweep within a minute of the last");
  clock.advance(1);
  await counters.applyChecks("ws_a", [{ ...check, limit: 0 }]);
  t.equal(counters.size, 1, "then every counter whose windows have ended is dropped; the recent one stays");
});
