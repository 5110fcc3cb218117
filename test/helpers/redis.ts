import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { connectRedis } from "../../src/storage/redis/connection.js";
import { createRedisStores } from "../../src/storage/redis-stores.js";

export const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** A key prefix no other test file uses; every key under it is deleted when the test ends (never FLUSHALL). */
export function uniquePrefix(t: Teardown, label = "test"): string {
  const prefix = `kgtest:${label}:${randomBytes(6).toString("hex")}`;
  t.teardown(() => deleteByPrefix(prefix));
  return prefix;
}

export async function deleteByPrefix(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
}

/** A plain connection for tests that look at Redis directly; closed on teardown. */
export async function redisClient(t: Teardown): Promise<Redis> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  t.teardown(() => redis.disconnect());
  return redis;
}

/** Stores on the test Redis, on a connection of their own under `prefix`, closed when the test ends. */
export async function openRedisStores(t: Teardown, prefix: string, options: Parameters<typeof createRedisStores>[3] = {}) {
  const redis = await connectRedis({ url: REDIS_URL, commandTimeoutMs: 2_000, connectTimeoutMs: 2_000 });
  const stores = createRedisStores(redis, prefix, true, options);
  t.teardown(() => stores.close());
  return stores;
}
