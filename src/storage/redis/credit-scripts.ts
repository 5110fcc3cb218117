import type { Result } from "ioredis";
import { luaScript } from "./lua-scripts.js";
import type { RedisClient } from "./topology.js";

/**
 * How what a receipt key holds once its script execution has been settled begins: "x" when the execution had not
 * run (it never will: an execution that finds its receipt key set runs nothing, see lua/ratelimit.lua), "x<n>"
 * when it had, and n credits were given back. A receipt of credits taken begins with a digit.
 */
export const SETTLED_MARK = "x";

/** The script and its contract: lua/refund-credits.lua. */
export const REFUND_CREDITS_LUA = luaScript("credit-balance", "refund-credits");

/** The script and its contract: lua/reconcile-credits.lua. */
export const RECONCILE_CREDITS_LUA = luaScript("credit-balance", "reconcile-credits");

declare module "ioredis" {
  interface RedisCommander<Context> {
    keygateRefundCredits(numberOfKeys: number, ...args: string[]): Result<string, Context>;
    keygateReconcileCredits(numberOfKeys: number, ...args: string[]): Result<string, Context>;
  }
}

export const CREDIT_COMMANDS = ["keygateRefundCredits", "keygateReconcileCredits"] as const;

/** Registers the credit scripts on a connection; ioredis sends EVALSHA and loads a script again after NOSCRIPT. */
export function defineCreditCommands(redis: Pick<RedisClient, "defineCommand">): void {
  if (typeof (redis as Partial<RedisClient>).keygateRefundCredits === "function") return;
  redis.defineCommand(CREDIT_COMMANDS[0], { lua: REFUND_CREDITS_LUA });
  redis.defineCommand(CREDIT_COMMANDS[1], { lua: RECONCILE_CREDITS_LUA });
}
