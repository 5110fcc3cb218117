import t from "tap";
import { keyRecord } from "../helpers/records.js";
import { openRedisStores, uniquePrefix } from "../helpers/redis.js";

// Reservations: units of a busy large limit admitted locally after Redis counted them first.

t.test("rate limit reservations: a busy counter is admitted from units reserved in Redis, counted there first", async (t) => {
  const prefix = uniquePrefix(t, "reserve");
  const open = async () => (await openRedisStores(t, prefix)).ratelimitCounters;
  const counters = await open();
  const now = 5_000 * 60_000 + 10;
  const check = { bucket: "busy", limit: 10_000, durationMs: 60_000, cost: 1 };

  const remaining: number[] = [];
  for (let i = 0; i < 200; i++) {
    const outcome = await counters.applyChecks("ws_a", [check], now);
    t.equal(outcome.passed, true);
    remaining.push(outcome.results[0]?.remaining as number);
  }
  t.same(
    remaining,
    Array.from({ length: 200 }, (_, i) => 10_000 - i - 1),
    "one instance answers remaining exactly, reservation or not",
  );
  // Another instance sees the units this one holds as taken: never more than the limit, at most one reservation less.
  const other = await open();
  const seen = (await other.applyChecks("ws_a", [{ ...check, cost: 0 }], now)).results[0]?.remaining as number;
  t.ok(seen <= 10_000 - 200 && seen >= 10_000 - 200 - 64, `the other instance sees ${seen} left`);
  t.ok(seen < 10_000 - 200, "some units are held here, counted in Redis");
});

t.test("rate limit reservations: a counter's first call reserves nothing, so one-off identifiers leave no units held", async (t) => {
  const prefix = uniquePrefix(t, "reserve-first");
  const open = async () => (await openRedisStores(t, prefix)).ratelimitCounters;
  const [counters, other] = [await open(), await open()];
  const now = 5_000 * 60_000 + 10;
  const check = (bucket: string) => ({ bucket, limit: 10_000, durationMs: 60_000, cost: 1 });

  for (let i = 0; i < 50; i++) t.equal((await counters.applyChecks("ws_a", [check(`caller-${i}`)], now)).passed, true);
  const seen = await Promise.all(
    Array.from({ length: 50 }, (_, i) => other.applyChecks("ws_a", [{ ...check(`caller-${i}`), cost: 0 }], now)),
  );
  t.same(
    seen.map((outcome) => outcome.results[0]?.remaining),
    Array.from({ length: 50 }, () => 10_000 - 1),
    "each new counter took its call's unit only",
  );

  // From its second call on, a counter reserves as before: 1% of the limit, 64 at most.
  const inRedis = async () => (await other.applyChecks("ws_a", [{ ...check("caller-0"), cost: 0 }], now)).results[0]?.remaining;
  t.equal((await counters.applyChecks("ws_a", [check("caller-0")], now)).results[0]?.remaining, 10_000 - 2);
  t.equal(await inRedis(), 10_000 - 2 - 64, "the second call reserved 64 units, counted in Redis");
  t.equal((await counters.applyChecks("ws_a", [check("caller-0")], now)).results[0]?.remaining, 10_000 - 3);
  t.equal(await inRedis(), 10_000 - 2 - 64, "the third call is admitted from them, without Redis");
});

t.test("rate limit reservations: none past half the limit, for small limits, credits, or two checks on one counter", async (t) => {
  const prefix = uniquePrefix(t, "noreserve");
  const stores = await openRedisStores(t, prefix);
  const other = (await openRedisStores(t, prefix)).ratelimitCounters;
  const counters = stores.ratelimitCounters;
  const now = 5_000 * 60_000 + 10;
  const check = (bucket: string, limit: number) => ({ bucket, limit, durationMs: 60_000, cost: 1 });
  const inRedis = async (bucket: string, limit: number) =>
    (await other.applyChecks("ws_a", [{ ...check(bucket, limit), cost: 0 }], now)).results[0]?.remaining;

  for (let i = 0; i < 600; i++) t.equal((await counters.applyChecks("ws_a", [check("half", 1_000)], now)).passed, true);
  t.equal(await inRedis("half", 1_000), 1_000 - 600, "past half the limit no unit is held back: every call was counted in Redis");

  await stores.keys.create(keyRecord("key_1"), { remaining: 1_000, lastRefillAt: 0 });
  for (let i = 0; i < 20; i++) {
    await counters.applyChecks("ws_a", [check("small", 999)], now);
    await counters.applyChecks("ws_a", [check("credited", 10_000)], now, { keyId: "key_1", cost: 1 });
    await counters.applyChecks("ws_a", [check("twice", 10_000), { ...check("twice", 10_000), cost: 2 }], now);
  }
  t.same(
    [await inRedis("small", 999), await inRedis("credited", 10_000), await inRedis("twice", 10_000)],
    [999 - 20, 10_000 - 20, 10_000 - 3 * 20],
    "a limit under 1,000, a credit, or one counter twice in a call: nothing reserved, every call counted in Redis",
  );
});

t.test("rate limit reservations: a call of several checks is admitted from units reserved on each of its counters", async (t) => {
  const prefix = uniquePrefix(t, "reserve-several");
  const stores = await openRedisStores(t, prefix);
  const other = (await openRedisStores(t, prefix)).ratelimitCounters;
  const counters = stores.ratelimitCounters;
  const now = 5_000 * 60_000 + 10;
  const key = { bucket: "key", limit: 10_000, durationMs: 60_000, cost: 1 };
  const route = { bucket: "route", limit: 1_000_000, durationMs: 3_600_000, cost: 1 };
  const inRedis = async (check: typeof key) => (await other.applyChecks("ws_a", [{ ...check, cost: 0 }], now)).results[0]?.remaining;
  for (let i = 0; i < 40; i++) t.equal((await counters.applyChecks("ws_a", [key, route], now)).passed, true);
  // The first call found both counters unused; the second reserved 64 on each; the other 38 took 38 of them.
  t.same([await inRedis(key), await inRedis(route)], [10_000 - 2 - 64, 1_000_000 - 2 - 64], "counted in Redis first, two calls made there");
  const alone = await counters.applyChecks("ws_a", [key], now);
  t.equal(alone.passed, true);
  t.equal(await inRedis(key), 10_000 - 2 - 64, "a call of the key's check alone is admitted from the same units");
  t.equal(alone.results[0]?.remaining, 10_000 - 2 - 64 + (64 - 39), "with what Redis had left plus the units still held");
});

t.test("rate limit reservations: two instances never admit more than the limit, and miss at most a reservation each", async (t) => {
  const prefix = uniquePrefix(t, "reserve-two");
  const open = async () => (await openRedisStores(t, prefix)).ratelimitCounters;
  const [a, b] = [await open(), await open()];
  const now = 5_000 * 60_000 + 10;
  const check = { bucket: "shared", limit: 1_000, durationMs: 60_000, cost: 1 };
  let admitted = 0;
  // In turns (each instance's calls on its own units) and concurrently (batches), until far past the limit.
  for (let i = 0; i < 300; i++) {
    const outcomes = await Promise.all([a, b, a, b, b].map((counters) => counters.applyChecks("ws_a", [check], now)));
    admitted += outcomes.filter((outcome) => outcome.passed).length;
  }
  t.ok(admitted <= 1_000, `${admitted} admitted: never more than the limit`);
  t.ok(admitted >= 1_000 - 2 * 10, `${admitted} admitted: at most one reservation (10) short per instance`);
});

t.test("rate limit reservations: ratelimit.reservations false decides every call on Redis", async (t) => {
  const prefix = uniquePrefix(t, "reserve-off");
  const stores = await openRedisStores(t, prefix, { ratelimitReservations: false });
  const counters = stores.ratelimitCounters;
  const now = 5_000 * 60_000 + 10;
  const check = { bucket: "busy", limit: 10_000, durationMs: 60_000, cost: 1 };
  for (let i = 0; i < 50; i++) await counters.applyChecks("ws_a", [check], now);
  t.equal((await counters.applyChecks("ws_a", [{ ...check, cost: 0 }], now)).results[0]?.remaining, 10_000 - 50, "nothing held back");
});
