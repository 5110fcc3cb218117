import t, { type Test } from "tap";
import { connectRedis } from "../../src/storage/redis/connection.js";
import { createRedisStores } from "../../src/storage/redis-stores.js";
import { startRedisSentinel } from "../helpers/redis-sentinel.js";
import { storeContract } from "./contract.js";

// Every store on the master that Redis Sentinel names (1 master, 1 replica, 3 sentinels), through the same client
// keygate opens from `storage.redis.sentinel`.

const sentinel = await startRedisSentinel(t);
let prefixes = 0;

async function openSentinelStores(t: Test) {
  const redis = await connectRedis({
    sentinel: { name: sentinel.name, sentinels: [...sentinel.sentinelUrls] },
    commandTimeoutMs: 2_000,
    connectTimeoutMs: 5_000,
  });
  const stores = createRedisStores(redis, `kgsentinel${prefixes++}`, true);
  t.teardown(() => stores.close());
  return stores;
}

t.test("stores on a Sentinel-watched master meet the store contract", (t) => storeContract(t, openSentinelStores));
