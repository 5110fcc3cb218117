import type { Result } from "ioredis";
import type { AnalyticsQuotaStore, QuotaUsage } from "../interfaces.js";
import type { RedisKeys } from "./keys.js";
import { luaScript } from "./lua-scripts.js";
import type { RedisClient } from "./topology.js";

/** The script and its contract: lua/analytics-quota-acquire.lua. */
const ACQUIRE_LUA = luaScript("analytics-quota-acquire");

/** The script and its contract: lua/analytics-quota-add-execution.lua. */
const ADD_EXECUTION_LUA = luaScript("analytics-quota-add-execution");

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
