import t from "tap";
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

  // From its second call on, a counter reserves as before.
  await counters.applyChecks("ws_a", [check("caller-0")], now);
  const calls = counters.stats.scriptCalls;
  t.equal((await counters.applyChecks("ws_a", [check("caller-0")], now)).results[0]?.remaining, 10_000 - 3);
  t.equal(counters.stats.scriptCalls, calls, "the third call is admitted from the units the second reserved");
});

t.test("rate limit reservations: none past half the limit, for small limits, credits or several checks", async (t) => {
  const stores = await openRedisStores(t, uniquePrefix(t, "noreserve"));
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
  t.ok(
    a.stats.localAdmissions > 0 && b.stats.localAdmissions > 0,
    `both admitted some calls locally (${a.stats.localAdmissions}, ${b.stats.localAdmissions})`,
  );
});

t.test("rate limit reservations: ratelimit.reservations false decides every call on Redis", async (t) => {
  const prefix = uniquePrefix(t, "reserve-off");
  const stores = await openRedisStores(t, prefix, { ratelimitReservations: false });
  const counters = stores.ratelimitCounters;
  const now = 5_000 * 60_000 + 10;
  const check = { bucket: "busy", limit: 10_000, durationMs: 60_000, cost: 1 };
  for (let i = 0; i < 50; i++) await counters.applyChecks("ws_a", [check], now);
  t.same([counters.stats.localAdmissions, counters.stats.redisDecisions], [0, 50]);
  t.equal((await counters.applyChecks("ws_a", [{ ...check, cost: 0 }], now)).results[0]?.remaining, 10_000 - 50, "nothing held back");
});
