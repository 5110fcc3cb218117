import type { Result } from "ioredis";
import { luaScript } from "./lua-scripts.js";
import type { RedisClient } from "./topology.js";

/** The script and its contract: lua/apply-batch.lua. */
const APPLY_BATCH_LUA = luaScript("apply-batch");

declare module "ioredis" {
  interface RedisCommander<Context> {
    keygateApplyBatch(numberOfKeys: number, ...args: string[]): Result<number, Context>;
  }
}

export const APPLY_BATCH_COMMAND = "keygateApplyBatch";

/** Registers the script once per connection; ioredis sends EVALSHA and reloads the script after NOSCRIPT. */
export function defineAtomicCommands(redis: RedisClient): void {
  if (typeof (redis as Partial<RedisClient>).keygateApplyBatch === "function") return;
  redis.defineCommand(APPLY_BATCH_COMMAND, { lua: APPLY_BATCH_LUA });
}

type Check = [number, "absent" | "present" | "equals" | "fieldAbsent" | "fieldEquals", string?, string?];
type Write = [string, number, string?, string?];

export class Batch {
  private readonly keys: string[] = [];
  private readonly positions = new Map<string, number>();
  private readonly checks: Check[] = [];
  private readonly writes: Write[] = [];

  private position(key: string): number {
    let position = this.positions.get(key);
    if (position === undefined) {
      this.keys.push(key);
      position = this.keys.length;
      this.positions.set(key, position);
    }
    return position;
  }

  /** The key must not exist. */
  absent(key: string): this {
    this.checks.push([this.position(key), "absent"]);
    return this;
  }

  /** The key must exist. */
  present(key: string): this {
    this.checks.push([this.position(key), "present"]);
    return this;
  }

  /** The key must hold exactly this string (compare-and-set on a record read earlier). */
  equals(key: string, value: string): this {
    this.checks.push([this.position(key), "equals", value]);
    return this;
  }

  /** The hash at `key` must not have `field`. */
  fieldAbsent(key: string, field: string): this {
    this.checks.push([this.position(key), "fieldAbsent", field]);
    return this;
  }

  /** The hash at `key` must hold exactly this string in `field` (compare-and-set on one field). */
  fieldEquals(key: string, field: string, value: string): this {
    this.checks.push([this.position(key), "fieldEquals", field, value]);
    return this;
  }

  set(key: string, value: string): this {
    this.writes.push(["set", this.position(key), value]);
    return this;
  }

  del(key: string): this {
    this.writes.push(["del", this.position(key)]);
    return this;
  }

  zadd(key: string, member: string): this {
    this.writes.push(["zadd", this.position(key), member]);
    return this;
  }

  zrem(key: string, member: string): this {
    this.writes.push(["zrem", this.position(key), member]);
    return this;
  }

  hset(key: string, field: string, value: string): this {
    this.writes.push(["hset", this.position(key), field, value]);
    return this;
  }

  hdel(key: string, field: string): this {
    this.writes.push(["hdel", this.position(key), field]);
    return this;
  }

  get hasWrites(): boolean {
    return this.writes.length > 0;
  }

  /** True when applied; false when a check failed and nothing was written. */
  async apply(redis: RedisClient): Promise<boolean> {
    const failedCheck = await redis.keygateApplyBatch(this.keys.length, ...this.keys, JSON.stringify({ c: this.checks, w: this.writes }));
    return failedCheck === 0;
  }
}

/** Reads a JSON record; null when the key is absent. */
export async function readJson<T>(redis: RedisClient, key: string): Promise<{ record: T; raw: string } | null> {
  const raw = await redis.get(key);
  return raw === null ? null : { record: JSON.parse(raw) as T, raw };
}

/**
 * Read-modify-write of one JSON record with optimistic concurrency. `change` gets the current record (null when
 * absent) and a batch already guarded by a compare-and-set on that exact record; it adds the writes of the new
 * state (or none) and returns its result. When another writer got there first the whole step is retried.
 */
export async function updateJson<T, R>(
  redis: RedisClient,
  key: string,
  change: (current: T | null, batch: Batch) => R,
  maxAttempts = 50,
): Promise<R> {
  for (let attempt = 0; attempt < maxAttempts; attempt++) {
    const current = await readJson<T>(redis, key);
    const batch = new Batch();
    if (current) batch.equals(key, current.raw);
    else batch.absent(key);
    const result = change(current?.record ?? null, batch);
    if (!batch.hasWrites || (await batch.apply(redis))) return result;
  }
  throw new Error(`gave up updating ${key}: other writers kept changing it`);
}
