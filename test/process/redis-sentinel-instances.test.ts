import t from "tap";
import { LONGEST_WINDOW_MS } from "../helpers/clock.js";
import { CLUSTER_ROOT_KEY, post, type RunningServer, startPair, steadyRatelimitLoad } from "../helpers/process.js";
import { startRedisSentinel } from "../helpers/redis-sentinel.js";
import { waitFor } from "../helpers/wait.js";

// Two keygate processes on a master watched by Redis Sentinel (storage.redis.sentinel): they count exactly, and
// when the master dies they keep answering, follow the promoted replica, and count exactly again.

const sentinel = await startRedisSentinel(t);
const sentinelForm = `sentinel: { name: "${sentinel.name}", sentinels: [${sentinel.sentinelUrls.map((url) => `"${url}"`).join(", ")}] }`;

const until = (what: string, ms: number, check: () => boolean | Promise<boolean>) =>
  waitFor(what, ms, async () => ((await check()) ? true : undefined));
const limit = (instance: RunningServer, body: Record<string, unknown>) => post(instance.baseUrl, "ratelimit.limit", CLUSTER_ROOT_KEY, body);

t.test("on Sentinel, a master killed under load: keygate keeps answering, follows the new master, and counts exactly", async (t) => {
  const [a, b] = await startPair(t, "analytics:\n  engine: off\n", { redis: sentinelForm });
  const apiId = (await post(a.baseUrl, "apis.createApi", CLUSTER_ROOT_KEY, { name: "before-failover" })).body.data.apiId;
  const exactBefore = { namespace: "sentinel", identifier: "before", limit: 100, duration: LONGEST_WINDOW_MS };
  const before = await Promise.all(Array.from({ length: 400 }, (_, i) => limit(i % 2 === 0 ? a : b, exactBefore)));
  t.equal(before.filter((result) => result.body.data.success).length, 100, "exactly the limit admitted before the failover");

  const load = { namespace: "sentinel", identifier: "steady", limit: 1_000_000, duration: LONGEST_WINDOW_MS };
  const traffic = steadyRatelimitLoad([a, b], load);
  await until("load running", 30_000, () => traffic.answered() >= 50);
  const { ms: failoverMs, promoted } = await sentinel.killMaster();
  // Both decide on Redis again once each has reconnected to the promoted replica and its breaker has closed. The
  // bound only ends a failing test; its message says what each instance answered and logged.
  await waitFor(
    "both instances sharing counters on the new master",
    120_000,
    async (because) => {
      const probe = { namespace: "sentinel", identifier: `probe-${Math.random()}`, limit: 1, duration: LONGEST_WINDOW_MS };
      const [first, second] = [await limit(a, probe), await limit(b, probe)];
      because(
        `a answered ${first.status} ${JSON.stringify(first.body.data ?? first.body.error)}, b ${second.status} ${JSON.stringify(second.body.data ?? second.body.error)}`,
      );
      return first.body.data?.success === true && second.body.data?.success === false ? true : undefined;
    },
    async () =>
      `master now ${(await sentinel.master()).port}\na logged:\n${a.stdout().slice(-2_000)}\nb logged:\n${b.stdout().slice(-2_000)}`,
  );
  const longestMs = await traffic.stop();
  t.comment(
    `failover took ${failoverMs} ms; answers during the load: ${JSON.stringify(Object.fromEntries(traffic.statuses))}; longest request ${longestMs.toFixed(0)} ms`,
  );
  t.same(
    [...traffic.statuses.keys()],
    [200],
    "every request during the failover was answered 200 (decided locally while no master answered)",
    { firstRefusals: Object.fromEntries(traffic.firstRefusals) },
  );
  t.equal((await sentinel.master()).port, promoted.port);

  const exactAfter = { ...exactBefore, identifier: "after", limit: 50 };
  const after = await Promise.all(Array.from({ length: 200 }, (_, i) => limit(i % 2 === 0 ? a : b, exactAfter)));
  t.equal(after.filter((result) => result.body.data.success).length, 50, "exactly the limit admitted after the failover");
  const created = await post(b.baseUrl, "keys.createKey", CLUSTER_ROOT_KEY, { apiId });
  t.equal(created.status, 200, "management writes work on the new master");
  t.equal((await post(a.baseUrl, "keys.verifyKey", CLUSTER_ROOT_KEY, { key: created.body.data.key })).body.data.code, "VALID");
});
