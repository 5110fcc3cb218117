import { Redis } from "ioredis";

/** The Redis the benchmarks use: REDIS_URL, or the local default. */
export const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

/** Deletes every key under `prefix` (SCAN and DEL; never FLUSHALL: the Redis may be shared). */
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

/** CPU time (user + system) the Redis server has used so far, in microseconds, from INFO cpu. */
export async function redisCpuMicros(redis: Redis): Promise<number> {
  const info = await redis.info("cpu");
  const seconds = (field: string) => Number(new RegExp(`^${field}:([0-9.]+)`, "m").exec(info)?.[1] ?? 0);
  return Math.round((seconds("used_cpu_user") + seconds("used_cpu_sys")) * 1e6);
}
