import t from "tap";
import { keyRecord } from "../helpers/records.js";
import { openRedisStores, redisClient, uniquePrefix } from "../helpers/redis.js";

// Rate limit counters and credit balances on a single Redis: keys, expiry, Redis time, local denials, batching, refunds.

t.test("rate limit counters: keys carry the workspace tag and a TTL of at most twice the duration; denials write nothing", async (t) => {
  const prefix = uniquePrefix(t, "counters");
  const stores = await openRedisStores(t, prefix);
  const inspect = await redisClient(t);
  const check = { bucket: "ns:rlns_1:alice", limit: 1, durationMs: 30_000, cost: 1 };
  // An injected time: on Redis's clock a window boundary could pass before the denial, which would then rightly pass.
  const now = 1_000 * 30_000 + 1_000;
  await stores.ratelimitCounters.applyChecks("ws_tagged", [{ ...check, cost: 0 }], now);
  t.same(await inspect.keys(`${prefix}:*`), [], "a cost-0 check writes nothing");
  await stores.ratelimitCounters.applyChecks("ws_tagged", [check], now);
  const keys = await inspect.keys(`${prefix}:*`);
  t.same(keys, [`${prefix}:{ws_tagged}:rlw:1:30000:ns:rlns_1:alice`]);
  const ttl = await inspect.pttl(keys[0] as string);
  t.ok(ttl > 0 && ttl <= 60_000, `TTL ${ttl} ms`);
  await inspect.pexpire(keys[0] as string, 5_000_000);
  t.equal((await stores.ratelimitCounters.applyChecks("ws_tagged", [check], now)).passed, false);
  t.ok((await inspect.pttl(keys[0] as string)) > 60_000, "a denial did not write (the TTL set by hand is still there)");
});

t.test("a rate limit counter expires when the window after its own ends; writes within a window keep that expiry", async (t) => {
  const prefix = uniquePrefix(t, "expiry");
  const stores = await openRedisStores(t, prefix);
  const inspect = await redisClient(t);
  const duration = 10_000;
  const windowStart = 180_000_000 * duration;
  const check = { bucket: "ns:rlns_1:bob", limit: 100, durationMs: duration, cost: 1 };
  const key = `${prefix}:{ws_expiry}:rlw:100:10000:ns:rlns_1:bob`;

  await stores.ratelimitCounters.applyChecks("ws_expiry", [check], windowStart + 1_000);
  const first = await inspect.pttl(key);
  t.ok(first > 18_000 && first <= 19_000, `1 s into its window: expires when the next one ends, 19 s later (pttl ${first})`);

  await inspect.pexpire(key, 5_000_000);
  await stores.ratelimitCounters.applyChecks("ws_expiry", [check], windowStart + 4_000);
  t.ok((await inspect.pttl(key)) > 4_000_000, "a write in the same window leaves the expiry alone");
  t.same(await inspect.hmget(key, "s", "c"), [String(windowStart / duration), "2"], "and was counted");

  await stores.ratelimitCounters.applyChecks("ws_expiry", [check], windowStart + duration + 2_500);
  const next = await inspect.pttl(key);
  t.ok(next > 16_500 && next <= 17_500, `the first write of the next window sets a new expiry (pttl ${next})`);
});

t.test("rate limit counters: without an injected time, windows follow the Redis server's clock", async (t) => {
  const stores = await openRedisStores(t, uniquePrefix(t, "time"));
  const inspect = await redisClient(t);
  const toMs = ([seconds, micros]: number[]) => Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
  const before = toMs(await inspect.time());
  const outcome = await stores.ratelimitCounters.applyChecks("ws_a", [{ bucket: "b", limit: 5, durationMs: 1_000, cost: 1 }]);
  const after = toMs(await inspect.time());
  t.ok(outcome.now >= before && outcome.now <= after, `decided at ${outcome.now}, Redis said ${before}..${after}`);
  t.equal(outcome.results[0]?.resetAt, (Math.floor(outcome.now / 1_000) + 1) * 1_000);
});

t.test("rate limit counters still work after Redis forgets its scripts (SCRIPT FLUSH)", async (t) => {
  const stores = await openRedisStores(t, uniquePrefix(t, "flush"));
  const check = { bucket: "b", limit: 2, durationMs: 60_000, cost: 1 };
  t.equal((await stores.ratelimitCounters.applyChecks("ws_a", [check], 1_000_000)).passed, true);
  await (await redisClient(t)).script("FLUSH");
  t.equal(
    (await stores.ratelimitCounters.applyChecks("ws_a", [check], 1_000_001)).results[0]?.remaining,
    0,
    "reloaded, and the count survived",
  );
});

t.test("rate limit counters: a window known to be exhausted is denied here, exactly as Redis would", async (t) => {
  const prefix = uniquePrefix(t, "fastpath");
  const first = await openRedisStores(t, prefix);
  const second = await openRedisStores(t, prefix);
  const inspect = await redisClient(t);
  const check = { bucket: "b", limit: 5, durationMs: 10_000, cost: 1 };
  const counter = `${prefix}:{ws_a}:rlw:5:10000:b`;
  const now = 1_000 * 10_000 + 100;

  for (let i = 0; i < 3; i++) await first.ratelimitCounters.applyChecks("ws_a", [check], now);
  for (let i = 0; i < 2; i++) await second.ratelimitCounters.applyChecks("ws_a", [check], now);
  const deniedByRedis = await first.ratelimitCounters.applyChecks("ws_a", [check], now + 1);
  t.equal(deniedByRedis.passed, false, "3 seen here is not enough to know: Redis decides, and denies");

  // Redis forgets the counter: only a decision made here can still deny.
  await inspect.del(counter);
  const deniedHere = await first.ratelimitCounters.applyChecks("ws_a", [check], now + 2);
  t.same(deniedHere.results, deniedByRedis.results, "now known exhausted: denied here, with Redis's answer");
  t.equal(await inspect.exists(counter), 0, "Redis was not asked");
  t.equal(
    (await first.ratelimitCounters.applyChecks("ws_a", [{ ...check, cost: 0 }], now + 3)).results[0]?.remaining,
    5,
    "a cost-0 check is never denied here: Redis decides it (and has nothing counted now)",
  );
});

t.test("rate limit counters: concurrent calls are decided in order, each on its own, in batches of any size", async (t) => {
  const stores = await openRedisStores(t, uniquePrefix(t, "batch"));
  const counters = stores.ratelimitCounters;
  const now = 2_000 * 60_000;
  const check = (bucket: string, limit: number, cost = 1) => ({ bucket, limit, durationMs: 60_000, cost });

  const outcomes = await Promise.all([
    counters.applyChecks("ws_a", [check("shared", 3, 2)], now),
    counters.applyChecks("ws_a", [check("shared", 3, 2)], now),
    counters.applyChecks("ws_a", [check("other", 5), check("shared", 3, 1)], now),
    counters.applyChecks("ws_b", [check("shared", 3, 2)], now),
    counters.applyChecks("ws_a", [check("shared", 3, 0)], now + 1),
  ]);
  t.same(
    outcomes.map((outcome) => [outcome.passed, ...outcome.results.map((result) => result.remaining)]),
    [
      [true, 1],
      [false, 1],
      [true, 4, 0],
      [true, 1],
      [true, 0],
    ],
    "as if sent one by one: the second call is denied and consumes nothing, the third takes the last unit",
  );

  // 2,500 keys at once: more than one execution carries.
  const wide = Array.from({ length: 100 }, (_, i) => check(`wide-${i}`, 25));
  const many = await Promise.all(Array.from({ length: 25 }, () => counters.applyChecks("ws_a", wide, now)));
  t.same([...new Set(many.map((outcome) => outcome.passed))], [true]);
  t.same(
    many.at(-1)?.results.map((result) => result.remaining),
    wide.map(() => 0),
    "all 25 calls of 100 checks were applied: each bucket is exactly full",
  );
});

t.test("credit refunds from two instances, among spends from both on the same key, all count", async (t) => {
  const prefix = uniquePrefix(t, "refunds");
  const [a, b] = [await openRedisStores(t, prefix), await openRedisStores(t, prefix)];
  await a.keys.create(keyRecord("key_1"), { remaining: 50, lastRefillAt: 0 });
  const now = 7_000 * 60_000;
  const work = Array.from({ length: 1_000 }, (_, i) => {
    const stores = i % 2 === 0 ? a : b;
    return i % 4 < 2
      ? stores.ratelimitCounters.applyChecks("ws_a", [], now, { keyId: "key_1", cost: 1 }).then((outcome) => (outcome.passed ? -1 : 0))
      : stores.keys.refundCredits("ws_a", "key_1", 1, now).then(() => 1);
  });
  const change = (await Promise.all(work)).reduce((sum, delta) => sum + delta, 0);
  t.equal(
    (await a.keys.getCredits("ws_a", "key_1"))?.remaining,
    50 + change,
    `50 + ${change}: every spend and every refund of both instances`,
  );
});
