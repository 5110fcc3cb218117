import { Redis } from "ioredis";
import t from "tap";
import { UNOBSERVED } from "../../../src/domain/observer.js";
import { Limiter } from "../../../src/domain/ratelimit/limiter.js";
import { KeygateError } from "../../../src/errors/keygate-error.js";
import type { RatelimitCounterStore } from "../../../src/storage/counter-interfaces.js";
import { MemoryRatelimitCounterStore } from "../../../src/storage/memory/ratelimit-counter-store.js";
import { createRedisStores } from "../../../src/storage/redis-stores.js";
import { ManualClock } from "../../helpers/clock.js";
import { freePort } from "../../helpers/ports.js";

/** Counters in a Redis nobody listens for: every call fails as unavailable (after the deadline, then at once). */
async function unreachableCounters(t: { teardown(fn: () => unknown): void }) {
  const redis = new Redis(`redis://127.0.0.1:${await freePort()}`, { lazyConnect: true, commandTimeout: 100, maxRetriesPerRequest: 1 });
  redis.on("error", () => {});
  redis.connect().catch(() => {});
  t.teardown(() => redis.disconnect());
  return createRedisStores(redis, "kgtest:unreachable", true, { breaker: { failureThreshold: 1, openMs: 60_000 } }).ratelimitCounters;
}

const check = (limit: number, cost = 1) => ({ bucket: "b", limit, durationMs: 10_000, cost });

t.test("fail: closed refuses with 503 ratelimit_unavailable and a Retry-After", async (t) => {
  const clock = new ManualClock();
  const limiter = new Limiter({
    counters: await unreachableCounters(t),
    localCounters: new MemoryRatelimitCounterStore(clock),
    failMode: "closed",
    clock,
    windowsFollowClock: true,
  });
  for (let i = 0; i < 2; i++) {
    const error = await limiter.checkAndConsume("ws_a", [check(5)], { source: "ratelimit.limit" }).catch((failure: unknown) => failure);
    t.ok(error instanceof KeygateError);
    t.equal((error as KeygateError).code, "err:unkey:data:ratelimit_unavailable");
    t.equal((error as KeygateError).status, 503);
    t.match((error as KeygateError).detail, /ratelimit\.fail: closed/);
    t.match((error as KeygateError).headers?.["retry-after"], /^[1-9]\d*$/);
  }
});

t.test("fail: open allows without counting, except what is certain without counters", async (t) => {
  const clock = new ManualClock(10_000 * 1_000 + 5);
  const limiter = new Limiter({
    counters: await unreachableCounters(t),
    localCounters: new MemoryRatelimitCounterStore(clock),
    failMode: "open",
    clock,
    windowsFollowClock: true,
  });
  for (let i = 0; i < 3; i++) {
    t.same(await limiter.checkAndConsume("ws_a", [check(1)], { source: "ratelimit.limit" }), {
      passed: true,
      results: [{ passed: true, remaining: 0, resetAt: 10_000 * 1_001 }],
      now: clock.now(),
      degraded: "open",
    });
  }
  t.equal((await limiter.checkAndConsume("ws_a", [check(0)], { source: "ratelimit.limit" })).passed, false, "a limit of 0 still blocks");
  t.equal(
    (await limiter.checkAndConsume("ws_a", [check(3, 4)], { source: "ratelimit.limit" })).passed,
    false,
    "a cost above the limit never fits",
  );
});

t.test("fail: local decides on this instance's own counters", async (t) => {
  const clock = new ManualClock(10_000 * 1_000);
  const local = new MemoryRatelimitCounterStore(clock);
  const limiter = new Limiter({
    counters: await unreachableCounters(t),
    localCounters: local,
    failMode: "local",
    clock,
    windowsFollowClock: false,
  });
  const outcomes = [];
  for (let i = 0; i < 3; i++) outcomes.push(await limiter.checkAndConsume("ws_a", [check(2)], { source: "ratelimit.limit" }));
  t.same(
    outcomes.map((outcome) => [outcome.passed, outcome.degraded]),
    [
      [true, "local"],
      [true, "local"],
      [false, "local"],
    ],
  );
  clock.advance(20_000);
  t.equal(
    (await limiter.checkAndConsume("ws_a", [check(2)], { source: "ratelimit.limit" })).passed,
    true,
    "local windows move with this instance's clock",
  );
});

t.test("each decision is reported with its source, result and who decided, fail modes included", async (t) => {
  const clock = new ManualClock();
  const reported: string[] = [];
  const observer = {
    ...UNOBSERVED,
    ratelimitDecided: (source: string, allowed: boolean, decider: string) => reported.push(`${source} ${allowed} ${decider}`),
  };
  const limiterWith = async (failMode: "open" | "closed" | "local", counters?: RatelimitCounterStore) =>
    new Limiter({
      counters: counters ?? (await unreachableCounters(t)),
      localCounters: new MemoryRatelimitCounterStore(clock),
      failMode,
      clock,
      windowsFollowClock: true,
      shared: "redis",
      observer,
    });
  const exact = await limiterWith("closed", new MemoryRatelimitCounterStore(clock));
  await exact.checkAndConsume("ws_a", [check(1)], { source: "key" });
  await exact.checkAndConsume("ws_a", [check(1)], { source: "key" });
  await (await limiterWith("open")).checkAndConsume("ws_a", [check(1)], { source: "gateway" });
  await (await limiterWith("local")).checkAndConsume("ws_a", [check(1)], { source: "multiLimit" });
  await t.rejects((await limiterWith("closed")).checkAndConsume("ws_a", [check(1)], { source: "ratelimit.limit" }));
  t.same(reported, [
    "key true redis",
    "key false redis",
    "gateway true fail_open",
    "multiLimit true fail_local",
    "ratelimit.limit false fail_closed",
  ]);
});
