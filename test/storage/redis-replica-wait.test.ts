import t, { type Test } from "tap";
import type { ApiRecord } from "../../src/storage/records.js";
import { connectRedis } from "../../src/storage/redis/connection.js";
import { WriteNotReplicatedError } from "../../src/storage/redis/replica-wait.js";
import { createRedisStores } from "../../src/storage/redis-stores.js";
import { startRedisSentinel } from "../helpers/redis-sentinel.js";
import { waitFor } from "../helpers/wait.js";

// storage.redis.waitForReplicas: a management write is acknowledged only after a replica confirmed it, so a
// failover cannot lose it; when no replica confirms in time the caller is told, and Redis is not counted as down.

const sentinel = await startRedisSentinel(t);
let prefixes = 0;

async function openStores(t: Test, replicaWait?: { replicas: number; timeoutMs: number }) {
  const redis = await connectRedis({
    sentinel: { name: sentinel.name, sentinels: [...sentinel.sentinelUrls] },
    commandTimeoutMs: 2_000,
    connectTimeoutMs: 5_000,
  });
  const stores = createRedisStores(redis, `kgreplicas${prefixes++}`, true, replicaWait ? { replicaWait } : {});
  t.teardown(() => stores.close());
  return stores;
}

const api = (id: string): ApiRecord => ({
  id,
  workspaceId: "ws_replicas",
  name: "replicated",
  keySpaceId: `ks_${id}`,
  createdAt: 0,
  deleteProtection: false,
});

t.test("a replica that does not confirm in time: the write is reported as not replicated, and the breaker stays closed", async (t) => {
  const stores = await openStores(t, { replicas: 1, timeoutMs: 200 });
  t.equal(await stores.apis.create(api("api_before")), true, "confirmed while the replica runs");
  const master = await sentinel.master();
  const frozen = sentinel.servers.find((server) => server.port !== master.port);
  if (!frozen) throw new Error("the setup has no replica");
  sentinel.freeze(frozen);
  try {
    await t.rejects(stores.apis.create(api("api_unconfirmed")), WriteNotReplicatedError);
    t.equal(stores.breaker?.state ?? "closed", "closed", "not counted as Redis being unavailable");
    t.equal((await stores.apis.get("ws_replicas", "api_before"))?.id, "api_before", "reads go on");
    t.equal(await stores.apis.create(api("api_before")), false, "a refused check writes nothing and waits for nothing");
  } finally {
    sentinel.resume(frozen);
  }
  await sentinel.waitUntilHealthy();
});

t.test("creations acknowledged while the master is killed are all on the promoted replica", async (t) => {
  const stores = await openStores(t, { replicas: 1, timeoutMs: 1_000 });
  const acknowledged: string[] = [];
  let running = true;
  let next = 0;
  const writer = async () => {
    while (running) {
      const id = `api_load${next++}`;
      const created = await stores.apis.create(api(id)).catch((error: Error) => {
        lastError = error.message;
        return false;
      });
      if (created) acknowledged.push(id);
      else await new Promise((resolve) => setTimeout(resolve, 10)); // a failing store may answer at once
    }
  };
  const writers = [writer(), writer(), writer(), writer()];
  let lastError = "";
  await waitFor("50 acknowledged creations", 30_000, (because) => {
    because(`${acknowledged.length} of ${next} acknowledged; last error: ${lastError}`);
    return acknowledged.length >= 50 ? true : undefined;
  });
  // The writers keep going through the failover; with the only replica promoted, nothing is confirmed afterwards.
  const { ms } = await sentinel.killMaster();
  running = false;
  await Promise.all(writers);
  t.comment(`${acknowledged.length} creations acknowledged of ${next} attempted; failover took ${ms} ms`);
  await waitFor("the store answering again on the promoted master", 30_000, async () =>
    (await stores.apis.get("ws_replicas", "api_load0")) !== undefined ? true : undefined,
  );
  const missing: string[] = [];
  for (const id of acknowledged) if ((await stores.apis.get("ws_replicas", id)) === null) missing.push(id);
  t.same(missing, [], `all ${acknowledged.length} acknowledged creations survived the failover`);
});
