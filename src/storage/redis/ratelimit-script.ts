import type { Result } from "ioredis";
import { luaScript } from "./lua-scripts.js";
import type { RedisClient } from "./topology.js";

/** The script's whole answer when it found its receipt key set and ran nothing (see ARGV[4]). */
export const CANCELLED_REPLY = "cancelled";

/** The script and its contract: lua/ratelimit.lua. */
export const RATELIMIT_LUA = luaScript("credit-balance", "ratelimit");

declare module "ioredis" {
  interface RedisCommander<Context> {
    keygateRatelimit(numberOfKeys: number, ...args: string[]): Result<string, Context>;
  }
}

/** The script's reply as numbers, in the order lua/ratelimit.lua gives them. */
export function parseRatelimitReply(reply: string): number[] {
  return reply.split(",").map(Number);
}

/** The script's command name on a connection. */
export const RATELIMIT_COMMAND = "keygateRatelimit";

/** Registers the script on a connection; ioredis sends EVALSHA and loads the script again after NOSCRIPT. */
export function defineRatelimitCommand(redis: RedisClient): void {
  if (typeof (redis as Partial<RedisClient>).keygateRatelimit === "function") return;
  redis.defineCommand(RATELIMIT_COMMAND, { lua: RATELIMIT_LUA });
}
