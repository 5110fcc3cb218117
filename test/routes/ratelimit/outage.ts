import type { Test } from "tap";
import { assertError } from "../../helpers/assertions.js";
import { LONGEST_WINDOW_MS } from "../../helpers/clock.js";
import { type CallResult, type Harness, harness } from "../../helpers/harness.js";
import { parseScrape } from "../../helpers/metrics.js";
import { type PrivateRedis, privateRedis } from "../../helpers/redis-server.js";
import { waitFor } from "../../helpers/wait.js";

export const DEADLINE_MS = 200;
const BREAKER = { failureThreshold: 3, openMs: 200 };
// The ten calls that check exactness must not straddle a window boundary.
const DURATION = LONGEST_WINDOW_MS;

/** One app on a private Redis, with short deadlines so failures show quickly. */
async function appOn(t: Test, server: PrivateRedis, fail: string): Promise<Harness> {
  return harness(t, {
    storage: "redis",
    config: {
      storage: {
        redis: { url: server.url, prefix: "kgtest:outage", commandTimeoutMs: DEADLINE_MS, connectTimeoutMs: 2_000, breaker: BREAKER },
      },
      ratelimit: { fail },
    },
  });
}

function callLimit(h: Harness, identifier: string, limit: number): Promise<CallResult> {
  return h.call("ratelimit.limit", { namespace: "outage", identifier, limit, duration: DURATION });
}

/** Sends requests until the breaker has closed again (its background probe closes it; requests may start one sooner). */
async function waitUntilRedisAnswers(h: Harness): Promise<void> {
  await waitFor("keygate notices that Redis is back (its breaker closes)", 20_000, async (because) => {
    if (h.app.stores.health.state === "closed") return true;
    because(`the breaker is ${h.app.stores.health.state}`);
    await callLimit(h, "probe", 1_000_000);
    return undefined;
  });
}

/**
 * How many ratelimit.limit calls this instance's metrics say the shared counters decided (Redis, or this instance
 * within what Redis granted it), as opposed to the fail mode.
 */
async function decidedByCounters(h: Harness): Promise<number> {
  const scrape = parseScrape((await h.app.inject({ method: "GET", url: "/metrics" })).body);
  let calls = 0;
  for (const result of ["allowed", "denied"]) {
    for (const decided of ["redis", "local"]) {
      calls += scrape.value("keygate_ratelimit_decisions_total", { source: "ratelimit.limit", result, decided });
    }
  }
  return calls;
}

/**
 * Ten calls against a limit of 5, alternating between two instances, on a new identifier each attempt. A call that
 * waits its whole deadline is answered by `ratelimit.fail` (fail: open admits it even when Redis, reached late,
 * would have refused it), so an attempt with such a call says nothing about exactness: a stall of a loaded CI
 * machine is not a keygate fault. Attempts go on until one has every call decided by the shared counters.
 */
async function afterRecovery(a: Harness, b: Harness): Promise<CallResult[]> {
  const decided = async () => (await decidedByCounters(a)) + (await decidedByCounters(b));
  let attempt = 0;
  return waitFor("an attempt has all ten calls decided by the shared counters", 30_000, async (because) => {
    attempt++;
    const before = await decided();
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(await callLimit(i % 2 === 0 ? a : b, `after-${attempt}`, 5));
    const byCounters = (await decided()) - before;
    because(`attempt ${attempt}: ${byCounters} of the ten calls decided by the shared counters (the rest did not reach Redis in time)`);
    return byCounters === 10 ? answers : undefined;
  });
}

/**
 * For each fail mode: Redis breaks (`breakRedis`), requests get the mode's answer (after at most a deadline each
 * while the breaker learns, then from the open breaker), then Redis returns (`restoreRedis`) and, without a
 * restart, limits are exact again across two instances.
 */
export async function outageScenarios(
  t: Test,
  failure: {
    name: string;
    breakRedis: (server: PrivateRedis) => Promise<void> | void;
    restoreRedis: (server: PrivateRedis) => Promise<void> | void;
  },
): Promise<void> {
  const expectations: Record<string, (t: Test, results: CallResult[]) => void> = {
    closed: (t, results) => {
      for (const result of results) {
        assertError(t, result, "err:unkey:data:ratelimit_unavailable", /ratelimit\.fail: closed/);
        t.match(result.headers["retry-after"], /^[1-9]\d*$/, "Retry-After says when to try again");
      }
    },
    open: (t, results) =>
      t.same(
        results.map((result) => [result.status, result.body.data.success]),
        results.map(() => [200, true]),
        "every request is allowed",
      ),
    local: (t, results) =>
      t.same(
        results.map((result) => result.body.data.success),
        results.map((_, index) => index < 2),
        "this instance's own counters: the limit of 2 still holds",
      ),
  };

  for (const fail of ["closed", "open", "local"]) {
    await t.test(`fail: ${fail} — ${failure.name}: the configured answer, the breaker opens, exact again once Redis is back`, async (t) => {
      const server = await privateRedis(t);
      const a = await appOn(t, server, fail);
      t.equal((await callLimit(a, "warm-up", 5)).body.data.success, true);

      await failure.breakRedis(server);
      const during = [];
      for (let i = 0; i < 8; i++) during.push(await callLimit(a, "during", 2));
      expectations[fail]?.(t, during);
      // Each call before the breaker opened ended at its deadline (or it would not have been answered at all);
      // once open, calls are answered without asking Redis.
      t.equal(a.app.stores.health.state === "closed", false, "the breaker is open");

      await failure.restoreRedis(server);
      await waitUntilRedisAnswers(a);
      const b = await appOn(t, server, fail);
      const answers = await afterRecovery(a, b);
      t.same(
        answers.map((result) => result.status),
        answers.map(() => 200),
      );
      t.equal(answers.filter((result) => result.body.data.success).length, 5, "two instances share the limit of 5 exactly again");
    });
  }
}
