import t, { type Test } from "tap";
import { createRedisStores } from "../../src/storage/index.js";
import { connectRedis } from "../../src/storage/redis/connection.js";
import { REDIS_URL, redisClient, uniquePrefix } from "../helpers/redis.js";
import { storeContract } from "./contract.js";

/** Stores on a connection of their own under `prefix`, closed when the test ends. */
async function openStores(t: Test, prefix: string, options: Parameters<typeof createRedisStores>[3] = {}) {
  const redis = await connectRedis({ url: REDIS_URL, commandTimeoutMs: 2_000, connectTimeoutMs: 2_000 });
  const stores = createRedisStores(redis, prefix, true, options);
  t.teardown(() => stores.close());
  return stores;
}

t.test("Redis stores meet the store contract", (t) => storeContract(t, (t) => openStores(t, uniquePrefix(t, "contract"))));

t.test("every key a workspace's records use carries the workspace as its hash tag", async (t) => {
  const prefix = uniquePrefix(t, "tags");
  const stores = await openStores(t, prefix);
  await stores.apis.create({
    id: "api_tagged",
    workspaceId: "ws_tagged",
    name: "tagged",
    keySpaceId: "ks_1",
    createdAt: 1,
    deleteProtection: false,
  });
  const inspect = await redisClient(t);
  const keys = await inspect.keys(`${prefix}:*`);
  t.ok(keys.length >= 2);
  for (const key of keys) t.match(key, new RegExp(`^${prefix}:\\{(ws_tagged|apis)\\}:`), `${key} has a hash tag`);
});

t.test("writes still work after Redis forgets its scripts (SCRIPT FLUSH)", async (t) => {
  const stores = await openStores(t, uniquePrefix(t, "noscript"));
  await stores.apis.create({
    id: "api_before",
    workspaceId: "ws_a",
    name: "before",
    keySpaceId: "ks_1",
    createdAt: 1,
    deleteProtection: false,
  });
  const inspect = await redisClient(t);
  await inspect.script("FLUSH");
  t.equal(
    await stores.apis.create({
      id: "api_after",
      workspaceId: "ws_a",
      name: "after",
      keySpaceId: "ks_2",
      createdAt: 1,
      deleteProtection: false,
    }),
    true,
  );
  t.equal((await stores.apis.get("ws_a", "api_after"))?.name, "after");
});

t.test("rate limit counters: keys carry the workspace tag and a TTL of at most twice the duration; denials write nothing", async (t) => {
  const prefix = uniquePrefix(t, "counters");
  const stores = await openStores(t, prefix);
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
  const stores = await openStores(t, prefix);
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
  const stores = await openStores(t, uniquePrefix(t, "time"));
  const inspect = await redisClient(t);
  const toMs = ([seconds, micros]: number[]) => Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
  const before = toMs(await inspect.time());
  const outcome = await stores.ratelimitCounters.applyChecks("ws_a", [{ bucket: "b", limit: 5, durationMs: 1_000, cost: 1 }]);
  const after = toMs(await inspect.time());
  t.ok(outcome.now >= before && outcome.now <= after, `decided at ${outcome.now}, Redis said ${before}..${after}`);
  t.equal(outcome.results[0]?.resetAt, (Math.floor(outcome.now / 1_000) + 1) * 1_000);
});

t.test("rate limit counters still work after Redis forgets its scripts (SCRIPT FLUSH)", async (t) => {
  const stores = await openStores(t, uniquePrefix(t, "flush"));
  const check = { bucket: "b", limit: 2, durationMs: 60_000, cost: 1 };
  t.equal((await stores.ratelimitCounters.applyChecks("ws_a", [check], 1_000_000)).passed, true);
  await (await redisClient(t)).script("FLUSH");
  t.equal(
    (await stores.ratelimitCounters.applyChecks("ws_a", [check], 1_000_001)).results[0]?.remaining,
    0,
    "reloaded, and the count survived",
  );
});

t.test("rate limit counters: a window known to be exhausted is denied without asking Redis, exactly as Redis would", async (t) => {
  const prefix = uniquePrefix(t, "fastpath");
  const open = async () => (await openStores(t, prefix)).ratelimitCounters;
  const first = await open();
  const second = await open();
  const check = { bucket: "b", limit: 5, durationMs: 10_000, cost: 1 };
  const now = 1_000 * 10_000 + 100;

  for (let i = 0; i < 3; i++) await first.applyChecks("ws_a", [check], now);
  for (let i = 0; i < 2; i++) await second.applyChecks("ws_a", [check], now);
  t.equal(first.stats.scriptCalls, 3);
  const deniedByRedis = await first.applyChecks("ws_a", [check], now + 1);
  t.same(
    [deniedByRedis.passed, first.stats.scriptCalls, first.stats.localDenials],
    [false, 4, 0],
    "3 seen here is not enough to know: Redis decides",
  );

  const deniedLocally = await first.applyChecks("ws_a", [check], now + 2);
  t.same(deniedLocally.results, deniedByRedis.results, "the same answer");
  t.same([first.stats.scriptCalls, first.stats.localDenials], [4, 1], "now known exhausted: no round trip");
  t.equal(
    (await first.applyChecks("ws_a", [{ ...check, cost: 0 }], now + 3)).passed,
    true,
    "a cost-0 check at the limit still goes to Redis and passes",
  );
  t.equal(first.stats.scriptCalls, 5);

  // Halfway through the next window the old counts have faded enough for Redis to admit again.
  const later = await first.applyChecks("ws_a", [check], now + 10_000 + 5_000);
  t.same([later.passed, first.stats.scriptCalls], [true, 6], "a window that may admit goes to Redis");
});

t.test("rate limit counters: concurrent calls share script executions and are decided in order, each on its own", async (t) => {
  const stores = await openStores(t, uniquePrefix(t, "batch"));
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
  t.equal(counters.stats.redisDecisions, 5);
  t.equal(counters.stats.scriptCalls, 3, "one execution per workspace and time: ws_a at now, ws_b at now, ws_a at now + 1");

  const wide = Array.from({ length: 100 }, (_, i) => check(`wide-${i}`, 25));
  const many = await Promise.all(Array.from({ length: 25 }, () => counters.applyChecks("ws_a", wide, now)));
  t.same([...new Set(many.map((outcome) => outcome.passed))], [true]);
  t.same(
    many.at(-1)?.results.map((result) => result.remaining),
    wide.map(() => 0),
    "all 25 calls of 100 checks were applied: each bucket is exactly full",
  );
  t.ok(
    counters.stats.scriptCalls >= 3 + 3,
    `2,500 keys went out in executions of at most 1,000 (${counters.stats.scriptCalls - 3} executions)`,
  );
});

t.test("an analytics quota window expires in Redis after its window", async (t) => {
  const prefix = uniquePrefix(t, "quota");
  const stores = await openStores(t, prefix);
  const windowStart = Date.now();
  await stores.analyticsQuota.acquire("ws_q", windowStart, 5_000, { queries: 10, executionMs: 10_000 });
  const inspect = await redisClient(t);
  const [key] = await inspect.keys(`${prefix}:*`);
  t.equal(key, `${prefix}:{ws_q}:analytics-quota:${windowStart}`, "built by keys.ts, with the workspace as hash tag");
  const ttl = await inspect.pttl(key as string);
  t.ok(ttl > 0 && ttl <= 5_000 + 60_000, `expires with the window (pttl ${ttl})`);
});

t.test("rate limit reservations: a busy counter is admitted from units reserved in Redis, counted there first", async (t) => {
  const prefix = uniquePrefix(t, "reserve");
  const open = async () => (await openStores(t, prefix)).ratelimitCounters;
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
  t.ok(counters.stats.localAdmissions >= 190, `${counters.stats.localAdmissions} of 200 admitted here`);
  t.equal(counters.stats.scriptCalls + counters.stats.localAdmissions, 200);

  // Another instance sees the units this one holds as taken: never more than the limit, at most one reservation less.
  const other = await open();
  const seen = (await other.applyChecks("ws_a", [{ ...check, cost: 0 }], now)).results[0]?.remaining as number;
  t.ok(seen <= 10_000 - 200 && seen >= 10_000 - 200 - 64, `the other instance sees ${seen} left`);

  // The units are for their window only.
  const calls = counters.stats.scriptCalls;
  t.equal((await counters.applyChecks("ws_a", [check], now + 60_000)).passed, true);
  t.equal(counters.stats.scriptCalls, calls + 1, "the next window is decided on Redis");
});

t.test("rate limit reservations: a counter's first call reserves nothing, so one-off identifiers leave no units held", async (t) => {
  const prefix = uniquePrefix(t, "reserve-first");
  const open = async () => (await openStores(t, prefix)).ratelimitCounters;
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

  // From its second call on, a counter reserves as before.
  await counters.applyChecks("ws_a", [check("caller-0")], now);
  const calls = counters.stats.scriptCalls;
  t.equal((await counters.applyChecks("ws_a", [check("caller-0")], now)).results[0]?.remaining, 10_000 - 3);
  t.equal(counters.stats.scriptCalls, calls, "the third call is admitted from the units the second reserved");
});

t.test("rate limit reservations: none past half the limit, for small limits, credits or several checks", async (t) => {
  const stores = await openStores(t, uniquePrefix(t, "noreserve"));
  const counters = stores.ratelimitCounters;
  const now = 5_000 * 60_000 + 10;
  const check = (bucket: string, limit: number) => ({ bucket, limit, durationMs: 60_000, cost: 1 });

  for (let i = 0; i < 500; i++) await counters.applyChecks("ws_a", [check("half", 1_000)], now);
  const before = { ...counters.stats };
  for (let i = 0; i < 100; i++) t.equal((await counters.applyChecks("ws_a", [check("half", 1_000)], now)).passed, true);
  t.equal(counters.stats.localAdmissions, before.localAdmissions, "past half the limit every call goes to Redis");
  t.equal(counters.stats.redisDecisions, before.redisDecisions + 100);

  await stores.keys.create(
    {
      id: "key_1",
      workspaceId: "ws_a",
      apiId: "api_1",
      keySpaceId: "ks_1",
      hash: "h",
      start: "s",
      byteLength: 16,
      enabled: true,
      permissionIds: [],
      roleIds: [],
      ratelimits: [],
      createdAt: 1,
    },
    { remaining: 1_000, lastRefillAt: 0 },
  );
  const local = counters.stats.localAdmissions;
  for (let i = 0; i < 20; i++) {
    await counters.applyChecks("ws_a", [check("small", 999)], now);
    await counters.applyChecks("ws_a", [check("credited", 10_000)], now, { keyId: "key_1", cost: 1 });
    await counters.applyChecks("ws_a", [check("pair-a", 10_000), check("pair-b", 10_000)], now);
  }
  t.equal(counters.stats.localAdmissions, local, "a limit under 1,000, a credit or a second check: always Redis");
  t.equal(
    (await counters.applyChecks("ws_a", [{ ...check("credited", 10_000), cost: 0 }], now)).results[0]?.remaining,
    10_000 - 20,
    "nothing reserved",
  );
});

t.test("rate limit reservations: two instances never admit more than the limit, and miss at most a reservation each", async (t) => {
  const prefix = uniquePrefix(t, "reserve-two");
  const open = async () => (await openStores(t, prefix)).ratelimitCounters;
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
  t.ok(
    a.stats.localAdmissions > 0 && b.stats.localAdmissions > 0,
    `both admitted some calls locally (${a.stats.localAdmissions}, ${b.stats.localAdmissions})`,
  );
});

t.test("rate limit reservations: ratelimit.reservations false decides every call on Redis", async (t) => {
  const prefix = uniquePrefix(t, "reserve-off");
  const stores = await openStores(t, prefix, { ratelimitReservations: false });
  const counters = stores.ratelimitCounters;
  const now = 5_000 * 60_000 + 10;
  const check = { bucket: "busy", limit: 10_000, durationMs: 60_000, cost: 1 };
  for (let i = 0; i < 50; i++) await counters.applyChecks("ws_a", [check], now);
  t.same([counters.stats.localAdmissions, counters.stats.redisDecisions], [0, 50]);
  t.equal((await counters.applyChecks("ws_a", [{ ...check, cost: 0 }], now)).results[0]?.remaining, 10_000 - 50, "nothing held back");
});

t.test("credit refunds from two instances, among spends from both on the same key, all count", async (t) => {
  const prefix = uniquePrefix(t, "refunds");
  const [a, b] = [await openStores(t, prefix), await openStores(t, prefix)];
  await a.keys.create(
    {
      id: "key_1",
      workspaceId: "ws_a",
      apiId: "api_1",
      keySpaceId: "ks_1",
      hash: "h",
      start: "s",
      byteLength: 16,
      enabled: true,
      permissionIds: [],
      roleIds: [],
      ratelimits: [],
      createdAt: 1,
    },
    { remaining: 50, lastRefillAt: 0 },
  );
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
