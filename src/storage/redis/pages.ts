import type { Page, PageRequest } from "../interfaces.js";
import type { RedisClient } from "./topology.js";

/** How many ids one round trip reads while a filter skips records. */
const SCAN_CHUNK = 200;

/**
 * A keyset page over a sorted set of ids (all scores 0, so ZRANGE BYLEX orders by id): up to `limit` records with
 * id >= cursor that `accept` keeps, and the id of the next kept record as nextCursor.
 */
export async function readPage<T>(
  redis: RedisClient,
  indexKey: string,
  recordKey: (id: string) => string,
  page: PageRequest,
  accept: (record: T) => boolean = () => true,
): Promise<Page<T>> {
  const items: T[] = [];
  let start = page.cursor === undefined ? "-" : `[${page.cursor}`;
  const chunk = Math.max(page.limit + 1, SCAN_CHUNK);
  for (;;) {
    const ids = await redis.zrange(indexKey, start, "+", "BYLEX", "LIMIT", 0, chunk);
    if (ids.length === 0) return { items };
    const raws = await redis.mget(ids.map(recordKey));
    for (let i = 0; i < ids.length; i++) {
      const raw = raws[i];
      if (raw === null || raw === undefined) continue;
      const record = JSON.parse(raw) as T;
      if (!accept(record)) continue;
      if (items.length === page.limit) return { items, nextCursor: ids[i] as string };
      items.push(record);
    }
    if (ids.length < chunk) return { items };
    start = `(${ids[ids.length - 1]}`;
  }
}

/** Records by id in the order given, skipping ids that do not resolve. */
export async function readMany<T>(redis: RedisClient, keys: readonly string[]): Promise<T[]> {
  if (keys.length === 0) return [];
  const raws = await redis.mget(keys as string[]);
  return raws.filter((raw): raw is string => raw !== null).map((raw) => JSON.parse(raw) as T);
}
