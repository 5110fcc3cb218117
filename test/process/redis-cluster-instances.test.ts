import { Cluster } from "ioredis";
import t, { type Test } from "tap";
import { LONGEST_WINDOW_MS } from "../helpers/clock.js";
import { CLUSTER_ROOT_KEY, post, type RunningServer, startPair, steadyRatelimitLoad } from "../helpers/process.js";
import { type RedisCluster, slotOf, startRedisCluster } from "../helpers/redis-cluster.js";
import { waitFor } from "../helpers/wait.js";

// Two keygate processes on one Redis Cluster (3 masters, 3 replicas), configured with storage.redis.cluster: counting
// stays exact across them, changes reach both, and neither a live reshard nor a master's death loses or
// over-admits anything.

const cluster: RedisCluster = await startRedisCluster(t);
const clusterForm = `cluster: { nodes: [${cluster.urls.map((url) => `"${url}"`).join(", ")}] }`;

/** A workspace id whose records (hash tag `{id}`) live in `slot`. */
function workspaceInSlot(slot: number): string {
  for (let n = 0; ; n++) if (slotOf(`{ws_slot${n}}`) === slot) return `ws_slot${n}`;
}

/** Waits, at most `ms`, until `check` says yes. */
const until = (what: string, ms: number, check: () => boolean | Promise<boolean>) =>
  waitFor(what, ms, async () => ((await check()) ? true : undefined));

const pair = (t: Test, workspaceId?: string, redisSettings = "") =>
  startPair(t, "analytics:\n  engine: off\n", { redis: clusterForm + redisSettings, ...(workspaceId ? { workspaceId } : {}) });

/**
 * For the tests of exact counting on a healthy cluster: a command answered late on a busy machine would otherwise count
 * as a failure and be decided locally (ratelimit.fail), which is the failover test's subject, not theirs.
 */
const PATIENT = ", commandTimeoutMs: 10000";

const limit = (instance: RunningServer, body: Record<string, unknown>) => post(instance.baseUrl, "ratelimit.limit", CLUSTER_ROOT_KEY, body);

t.test("on the cluster, 1,000 concurrent verifications of a key with 100 credits across two keygates give exactly 100 VALID", async (t) => {
  const [a, b] = await pair(t, undefined, PATIENT);
  const apiId = (await post(a.baseUrl, "apis.createApi", CLUSTER_ROOT_KEY, { name: "metered" })).body.data.apiId;
  const { key } = (await post(a.baseUrl, "keys.createKey", CLUSTER_ROOT_KEY, { apiId, credits: { remaining: 100 } })).body.data;
  const results = await Promise.all(
    Array.from({ length: 1_000 }, (_, i) => post((i % 2 === 0 ? a : b).baseUrl, "keys.verifyKey", CLUSTER_ROOT_KEY, { key })),
  );
  const codes = new Map<string, number>();
  for (const result of results) codes.set(result.body.data.code, (codes.get(result.body.data.code) ?? 0) + 1);
  t.same(Object.fromEntries(codes), { VALID: 100, USAGE_EXCEEDED: 900 });
});

t.test("on the cluster, 1,000 concurrent ratelimit.limit calls on a limit of 100 over two keygates admit exactly 100", async (t) => {
  const [a, b] = await pair(t, undefined, PATIENT);
  const body = { namespace: "burst", identifier: "everyone", limit: 100, duration: LONGEST_WINDOW_MS };
  const results = await Promise.all(Array.from({ length: 1_000 }, (_, i) => limit(i % 2 === 0 ? a : b, body)));
  t.same([...new Set(results.map((result) => result.status))], [200]);
  t.equal(results.filter((result) => result.body.data.success).length, 100);
});

t.test("on the cluster, a key revoked through one keygate is refused by the other (pub/sub reaches every node's clients)", async (t) => {
  const [a, b] = await pair(t);
  const apiId = (await post(a.baseUrl, "apis.createApi", CLUSTER_ROOT_KEY, { name: "shared" })).body.data.apiId;
  const { key, keyId } = (await post(a.baseUrl, "keys.createKey", CLUSTER_ROOT_KEY, { apiId })).body.data;
  const verifyOnB = async () => (await post(b.baseUrl, "keys.verifyKey", CLUSTER_ROOT_KEY, { key })).body.data.code as string;
  t.equal(await verifyOnB(), "VALID", "b holds the key in its cache");
  t.equal((await post(a.baseUrl, "keys.updateKey", CLUSTER_ROOT_KEY, { keyId, enabled: false })).status, 200);
  await until("b refusing the disabled key", 10_000, async () => (await verifyOnB()) === "DISABLED");
  t.pass("b refuses the key once a disabled it");
});

t.test("a live reshard of the workspace's slot under load: no failed request, no over-admission", async (t) => {
  const [from, to] = (await cluster.topology()).masters;
  if (!from || !to) throw new Error("the cluster has fewer than two masters");
  const firstSlot = from.slots[0]?.[0] as number;
  const workspaceId = workspaceInSlot(firstSlot);
  const [a, b] = await pair(t, workspaceId, PATIENT);
  const body = { namespace: "reshard", identifier: "moving", limit: 300, duration: LONGEST_WINDOW_MS };
  t.equal((await limit(a, { ...body, cost: 0 })).status, 200, "the namespace exists before the reshard");

  // Filler keys in the slot keep it migrating for a while (one key per MIGRATE), so the load meets ASK and TRYAGAIN.
  const filler = new Cluster([...cluster.urls], { lazyConnect: true });
  filler.on("error", () => {});
  await filler.connect();
  for (let batch = 0; batch < 10; batch++) {
    await filler.mset(Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`filler:{${workspaceId}}:${batch}:${i}`, "x".repeat(64)])));
  }
  filler.disconnect();

  const reshard = await cluster.reshard({ from, to, slots: 20, pipeline: 1 });
  t.ok(reshard.slots.includes(firstSlot), `the reshard moves slot ${firstSlot}, where workspace ${workspaceId} lives`);
  let moving = true;
  void reshard.done.finally(() => (moving = false));
  const statuses = new Map<number, number>();
  let admitted = 0;
  let calls = 0;
  let callsWhileMoving = 0;
  while (moving || calls < 600) {
    if (moving) callsWhileMoving += 20;
    const wave = await Promise.all(Array.from({ length: 20 }, (_, i) => limit(i % 2 === 0 ? a : b, body)));
    for (const result of wave) {
      statuses.set(result.status, (statuses.get(result.status) ?? 0) + 1);
      if (result.body.data?.success) admitted++;
    }
    calls += wave.length;
  }
  const { ms } = await reshard.done;
  t.comment(`reshard of 20 slots took ${ms} ms; ${calls} calls in waves of 20, ${callsWhileMoving} of them while it ran`);
  t.ok(callsWhileMoving > 0, "calls were made while the slot moved");
  t.same(Object.fromEntries(statuses), { 200: calls }, "every call answered 200");
  t.equal(admitted, 300, "exactly the limit admitted");
  t.equal((await cluster.masterOf(firstSlot)).id, to.id, "the slot now lives on the other master");
});

t.test("a master killed under load: keygate keeps answering (fail: local) and counts exactly again afterwards", async (t) => {
  const workspaceId = workspaceInSlot(0);
  const [a, b] = await pair(t, workspaceId);
  const victim = await cluster.masterOf(0);
  const load = { namespace: "failover", identifier: "steady", limit: 1_000_000, duration: LONGEST_WINDOW_MS };
  t.equal((await limit(a, { ...load, cost: 0 })).status, 200);

  const traffic = steadyRatelimitLoad([a, b], load);
  await until("load running", 30_000, () => traffic.answered() >= 50);
  const { ms: failoverMs } = await cluster.killMaster(victim);
  // Exact again: once a fresh identifier's limit is decided on Redis by both instances.
  const exact = { namespace: "failover", identifier: "after", limit: 50, duration: LONGEST_WINDOW_MS };
  await until(
    "answers after the failover",
    30_000,
    async () => (await limit(a, { ...exact, identifier: `probe-${Date.now()}`, cost: 0 })).status === 200,
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

  // The breaker may still be open for a moment after the failover: wait until both decide on Redis again.
  await until("both instances sharing counters on Redis again", 30_000, async () => {
    const probe = { ...exact, identifier: `probe-redis-${Math.random()}`, limit: 1 };
    const first = await limit(a, probe);
    const second = await limit(b, probe);
    return first.body.data?.success === true && second.body.data?.success === false;
  });
  const results = await Promise.all(Array.from({ length: 200 }, (_, i) => limit(i % 2 === 0 ? a : b, exact)));
  t.equal(results.filter((result) => result.body.data.success).length, 50, "after the failover exactly the limit is admitted");
});
