import t, { type Test } from "tap";
import type { RatelimitBatchStore } from "../../../src/storage/counter-interfaces.js";
import { createMemoryStores } from "../../../src/storage/index.js";
import type { KeyStore } from "../../../src/storage/interfaces.js";
import type { MemoryRatelimitCounterStore } from "../../../src/storage/memory/ratelimit-counter-store.js";
import { keyRecord } from "../../helpers/records.js";
import { openRedisStores, uniquePrefix } from "../../helpers/redis.js";

// What the policies of storage/ratelimit/ rely on, from the memory store and from Redis (lua/ratelimit.lua) alike.

interface Opened {
  batches: RatelimitBatchStore;
  keys: KeyStore;
}

const DURATION = 60_000;
const NOW = 3_000 * DURATION + 10;
const check = (bucket: string, limit: number, cost = 1) => ({ bucket, limit, durationMs: DURATION, cost });

async function batchStoreContract(t: Test, open: (t: Test) => Promise<Opened>): Promise<void> {
  await t.test("calls are decided in order, each as if alone; an exhausted window reports its counts", async (t) => {
    const { batches } = await open(t);
    const decisions = await batches.applyBatch(
      "ws_a",
      [{ checks: [check("b", 3, 2)] }, { checks: [check("b", 3, 2)] }, { checks: [check("other", 5), check("b", 3, 1)] }],
      NOW,
    );
    t.same(
      decisions.map(({ outcome }) => [outcome.passed, ...outcome.results.map((result) => result.remaining)]),
      [
        [true, 1],
        [false, 1],
        [true, 4, 0],
      ],
    );
    t.same(decisions[2]?.windows, [
      { sequence: 3_000, reserved: 0 },
      { sequence: 3_000, reserved: 0, counts: { current: 3, previous: 0 } },
    ]);
    t.equal(decisions[0]?.outcome.now, NOW);
  });

  await t.test("a reservation is granted on a counter in use, up to half the window, and counted", async (t) => {
    const { batches } = await open(t);
    const call = (cost = 1, reserve = 64) => batches.applyBatch("ws_a", [{ checks: [check("r", 1_000, cost)], reserve: [reserve] }], NOW);
    const first = await call();
    t.same([first[0]?.windows[0]?.reserved, first[0]?.outcome.results[0]?.remaining], [0, 999], "a counter's first call reserves nothing");
    const second = await call();
    t.same([second[0]?.windows[0]?.reserved, second[0]?.outcome.results[0]?.remaining], [64, 1_000 - 2 - 64], "then it may");
    const near = await call(430);
    t.same(
      [near[0]?.windows[0]?.reserved, near[0]?.outcome.results[0]?.remaining],
      [4, 1_000 - 496 - 4],
      "only as far as the window stays at most half used",
    );
    t.equal((await call())[0]?.windows[0]?.reserved, 0, "past half, none");
  });

  await t.test("a call with credits reserves nothing, whatever it asks", async (t) => {
    const { batches, keys } = await open(t);
    await keys.create(keyRecord("key_1"), { remaining: 100, lastRefillAt: 0 });
    for (let i = 0; i < 2; i++) {
      const decisions = await batches.applyBatch(
        "ws_a",
        [{ checks: [check("c", 1_000)], credit: { keyId: "key_1", cost: 1 }, reserve: [64] }],
        NOW,
      );
      t.same(
        decisions.map((decision) => decision.windows.map((window) => window.reserved)),
        [[0]],
      );
      t.equal(decisions[0]?.outcome.credit?.remaining, 100 - i - 1);
    }
  });

  await t.test("each check of a call reserves on its own counter, only when the whole call passes", async (t) => {
    const { batches } = await open(t);
    const call = (q: number, reserve: number[]) =>
      batches.applyBatch("ws_a", [{ checks: [check("p", 1_000), check("q", q)], reserve }], NOW).then((d) => d[0]);
    const first = await call(2_000, [10, 20]);
    t.same(
      first?.windows.map((window) => window.reserved),
      [0, 0],
      "counters not in use yet: nothing",
    );
    const second = await call(2_000, [10, 20]);
    t.same(
      second?.windows.map((window) => window.reserved),
      [10, 20],
      "then each its own units",
    );
    t.same(
      second?.outcome.results.map((result) => result.remaining),
      [1_000 - 2 - 10, 2_000 - 2 - 20],
      "counted in each window",
    );
    const onlyFirst = await call(2_000, [10, 0]);
    t.same(
      onlyFirst?.windows.map((window) => window.reserved),
      [10, 0],
      "a check that asks for none gets none",
    );
    // q at 1,000 is a new counter (its limit names it) of the same bucket: p passes, q does too, but is not in use yet.
    const fresh = await call(1_000, [10, 10]);
    t.same(
      fresh?.windows.map((window) => window.reserved),
      [10, 0],
      "each counter's own rule: q's is new",
    );
    const denied = await batches.applyBatch("ws_a", [{ checks: [check("p", 1_000), check("z", 1_000, 2_000)], reserve: [10, 10] }], NOW);
    t.equal(denied[0]?.outcome.passed, false);
    t.same(
      denied[0]?.windows.map((window) => window.reserved),
      [0, 0],
      "a denied call reserves nothing",
    );
    t.equal(denied[0]?.outcome.results[0]?.remaining, 1_000 - 4 - 30, "and consumed nothing");
  });
}

t.test("the memory store", (t) =>
  batchStoreContract(t, async () => {
    const stores = createMemoryStores();
    return { batches: stores.ratelimitCounters as MemoryRatelimitCounterStore, keys: stores.keys };
  }),
);

t.test("Redis", (t) =>
  batchStoreContract(t, async (t) => {
    const stores = await openRedisStores(t, uniquePrefix(t, "batches"));
    return { batches: stores.ratelimitBatches, keys: stores.keys };
  }),
);
