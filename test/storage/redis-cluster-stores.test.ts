import t, { type Test } from "tap";
import { createRedisStores } from "../../src/storage/index.js";
import { connectRedis } from "../../src/storage/redis/connection.js";
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
