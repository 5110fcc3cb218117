import type { Result } from "ioredis";
import type { AnalyticsQuotaStore, QuotaUsage } from "../interfaces.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

/**
 * KEYS[1]: the window's hash. ARGV: query limit, execution-ms limit, time to live (ms).
 * Counts a query unless a limit is reached; returns {allowed 0|1, queries, executionMs}.
 */
const ACQUIRE_LUA = `
local queries = tonumber(redis.call("HGET", KEYS[1], "queries") or "0")
local executionMs = tonumber(redis.call("HGET", KEYS[1], "executionMs") or "0")
if queries >= tonumber(ARGV[1]) or executionMs >= tonumber(ARGV[2]) then
  return {0, queries, executionMs}
end
queries = redis.call("HINCRBY", KEYS[1], "queries", 1)
redis.call("PEXPIRE", KEYS[1], ARGV[3])
return {1, queries, executionMs}
`;

/** KEYS[1]: the window's hash. ARGV: milliseconds to add, time to live (ms). */
const ADD_EXECUTION_LUA = `
redis.call("HINCRBY", KEYS[1], "executionMs", ARGV[1])
redis.call("PEXPIRE", KEYS[1], ARGV[2])
return 0
`;

declare module "ioredis" {
  interface RedisCommander<Context> {
    keygateQuotaAcquire(key: string, queries: string, executionMs: string, ttlMs: string): Result<[number, number, number], Context>;
    keygateQuotaAddExecution(key: string, ms: string, ttlMs: string): Result<number, Context>;
  }
}

/**
 * Each write gives the window's hash a time to live of one window plus this grace, counted from the write, so the
 * hash is gone soon after its window ends without the store needing to know the time (the window is in the key).
 */
const EXPIRY_GRACE_MS = 60_000;

export class RedisAnalyticsQuotaStore implements AnalyticsQuotaStore {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.redis = redis;
    this.keys = keys;
    if (typeof (redis as Partial<RedisClient>).keygateQuotaAcquire !== "function") {
      redis.defineCommand("keygateQuotaAcquire", { numberOfKeys: 1, lua: ACQUIRE_LUA });
      redis.defineCommand("keygateQuotaAddExecution", { numberOfKeys: 1, lua: ADD_EXECUTION_LUA });
    }
  }

  async acquire(
    workspaceId: string,
    windowStart: number,
    windowMs: number,
    limits: QuotaUsage,
  ): Promise<{ allowed: boolean; usage: QuotaUsage }> {
    const [allowed, queries, executionMs] = await this.redis.keygateQuotaAcquire(
      this.keys.analyticsQuota(workspaceId, windowStart),
      String(limits.queries),
      String(limits.executionMs),
      String(windowMs + EXPIRY_GRACE_MS),
    );
    return { allowed: allowed === 1, usage: { queries, executionMs } };
  }

  async addExecutionMs(workspaceId: string, windowStart: number, windowMs: number, ms: number): Promise<void> {
    await this.redis.keygateQuotaAddExecution(
      this.keys.analyticsQuota(workspaceId, windowStart),
      String(Math.max(0, Math.round(ms))),
      String(windowMs + EXPIRY_GRACE_MS),
    );
  }
}
