import t, { type Test } from "tap";
import { NAMESPACE_FRESH_MS } from "../../src/domain/ratelimit/namespace-directory.js";
import { LONGEST_WINDOW_MS } from "../helpers/clock.js";
import { CLUSTER_ROOT_KEY, post, type RunningServer, startPair } from "../helpers/process.js";
import { waitFor } from "../helpers/wait.js";

const ROOT_KEY = CLUSTER_ROOT_KEY;

/** Two keygate processes on one Redis and one key prefix. */
const twoInstances = (t: { teardown(fn: () => unknown): void }) => startPair(t);

/**
 * `count` concurrent ratelimit.limit requests for `body`, alternating between the two processes, after each has
 * learnt the namespace (a cost-0 check, which consumes nothing and must see the whole limit).
 */
async function burst(t: Test, [a, b]: [RunningServer, RunningServer], body: { limit: number } & Record<string, unknown>, count: number) {
  for (const instance of [a, b])
    t.equal((await post(instance.baseUrl, "ratelimit.limit", ROOT_KEY, { ...body, cost: 0 })).body.data.remaining, body.limit);
  const results = await Promise.all(
    Array.from({ length: count }, (_, i) => post((i % 2 === 0 ? a : b).baseUrl, "ratelimit.limit", ROOT_KEY, body)),
  );
  t.same([...new Set(results.map((result) => result.status))], [200]);
  return results;
}

t.test("1,000 concurrent requests against a limit of 100, split over two keygate processes: exactly 100 succeed", async (t) => {
  const [a, b] = await twoInstances(t);
  const results = await burst(t, [a, b], { namespace: "burst", identifier: "everyone", limit: 100, duration: LONGEST_WINDOW_MS }, 1_000);
  const admitted = results.filter((result) => result.body.data.success);
  t.equal(admitted.length, 100);
  t.same(
    admitted.map((result) => result.body.data.remaining as number).sort((x, y) => x - y),
    Array.from({ length: 100 }, (_, i) => i),
    "each admitted request saw a different remaining, 99 down to 0: no two took the same unit",
  );
  const [onA, onB] = [0, 1].map((parity) => results.filter((result, index) => index % 2 === parity && result.body.data.success).length) as [
    number,
    number,
  ];
  t.equal(onA + onB, 100, `admitted per instance: ${onA} + ${onB}`);
  await Promise.all([a.stop(), b.stop()]);
});

t.test(
  "3,000 concurrent requests against a limit of 1,000 (reservations engaged), over two processes: never more than 1,000",
  async (t) => {
    const [a, b] = await twoInstances(t);
    const results = await burst(t, [a, b], { namespace: "burst", identifier: "large", limit: 1_000, duration: LONGEST_WINDOW_MS }, 3_000);
    const admitted = results.filter((result) => result.body.data.success).length;
    // Each process may hold back at most one reservation (1% of the limit) that the other could not use.
    t.ok(admitted <= 1_000 && admitted >= 1_000 - 2 * 10, `${admitted} admitted`);
    await Promise.all([a.stop(), b.stop()]);
  },
);

t.test("an override set through one process applies on the other once its namespace cache refreshes", async (t) => {
  const [a, b] = await twoInstances(t);
  const body = { namespace: "plans", identifier: "vip", limit: 1, duration: 60_000 };
  t.equal((await post(b.baseUrl, "ratelimit.limit", ROOT_KEY, body)).body.data.limit, 1, "b knows the namespace, and no override");
  const set = await post(a.baseUrl, "ratelimit.setOverride", ROOT_KEY, {
    namespace: "plans",
    identifier: "vip",
    limit: 1_000,
    duration: 60_000,
  });
  // b's namespace cache is fresh for NAMESPACE_FRESH_MS; the bound only ends a failing test.
  const applied = await waitFor("b applying the override", NAMESPACE_FRESH_MS + 10_000, async () => {
    const answer = await post(b.baseUrl, "ratelimit.limit", ROOT_KEY, body);
    return answer.body.data.overrideId === set.body.data.overrideId ? answer.body.data : undefined;
  });
  t.equal(applied.limit, 1_000, "b applies the override's limit");
  await Promise.all([a.stop(), b.stop()]);
});
