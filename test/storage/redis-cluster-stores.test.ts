import t, { type Test } from "tap";
import { connectRedis } from "../../src/storage/redis/connection.js";
import { createRedisStores } from "../../src/storage/redis-stores.js";
import { startRedisCluster } from "../helpers/redis-cluster.js";
import { storeContract } from "./contract.js";

// Every store on a Redis Cluster of 3 masters and 3 replicas, through the same client keygate opens from
// `storage.redis.cluster`: each script and multi-key command keeps its keys in one slot (the workspace's hash tag).

const cluster = await startRedisCluster(t);
let prefixes = 0;

async function openClusterStores(t: Test) {
  const redis = await connectRedis({ cluster: { nodes: [...cluster.urls] }, commandTimeoutMs: 2_000, connectTimeoutMs: 5_000 });
  const stores = createRedisStores(redis, `kgcluster${prefixes++}`, true);
  t.teardown(() => stores.close());
  return stores;
}

t.test("Redis Cluster stores meet the store contract", (t) => storeContract(t, openClusterStores));

t.test("writes of many workspaces issued in one tick (their slots on every master) all succeed", async (t) => {
  const stores = await openClusterStores(t);
  const created = await Promise.all(
    Array.from({ length: 60 }, (_, i) =>
      stores.apis.create({
        id: `api_tick${i}`,
        workspaceId: `ws_tick${i}`,
        name: "one-tick",
        keySpaceId: `ks_tick${i}`,
        createdAt: 0,
        deleteProtection: false,
      }),
    ),
  );
  t.same(created, Array(60).fill(true));
  const refunds = await Promise.all(Array.from({ length: 60 }, (_, i) => stores.keys.refundCredits(`ws_tick${i}`, `key_absent${i}`, 1, 0)));
  t.equal(refunds.length, 60, "credit scripts of many slots in one tick are answered too");
});

t.test("APIs created before the per-workspace index are found by a scan of every master", async (t) => {
  const prefix = `kgcluster${prefixes}`;
  const stores = await openClusterStores(t);
  const record = (id: string, workspaceId: string) => ({
    id,
    workspaceId,
    name: id,
    keySpaceId: `ks_${id}`,
    createdAt: 1,
    deleteProtection: false,
  });
  // Workspaces whose slots lie on different masters, each with an API written as an earlier keygate did.
  const writer = await connectRedis({ cluster: { nodes: [...cluster.urls] }, commandTimeoutMs: 2_000, connectTimeoutMs: 5_000 });
  t.teardown(() => writer.quit());
  const workspaces = Array.from({ length: 6 }, (_, i) => `ws_earlier${i}`);
  for (const workspaceId of workspaces)
    await writer.set(`${prefix}:{${workspaceId}}:api:api_${workspaceId}`, JSON.stringify(record(`api_${workspaceId}`, workspaceId)));
  for (const workspaceId of workspaces) {
    t.same(
      (await stores.apis.list(workspaceId)).map((api) => api.id),
      [`api_${workspaceId}`],
      workspaceId,
    );
  }
});
