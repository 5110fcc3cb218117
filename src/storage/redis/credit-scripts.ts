import type { Result } from "ioredis";
import type { RedisClient } from "./topology.js";

/**
 * Lua shared by every script that reads or writes a credit balance (keys.keyCredits: JSON {remaining, refill?:
 * {interval, amount, refillDay?}, lastRefillAt}): the refill arithmetic of lib/credit-refill.ts, mirrored (keep
 * them in step), the balance's encoding, and the decision time. Defines DAY, whole, encodeBalance, refilled and
 * timeFrom.
 */
export const BALANCE_LUA = `
local DAY = 86400000

-- Calendar arithmetic on days since 1970-01-01 (proleptic Gregorian), for monthly refills.
local function civilFromDays(days)
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local day = doy - math.floor((153 * mp + 2) / 5) + 1
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400
  if month <= 2 then year = year + 1 end
  return year, month, day
end

local function daysFromCivil(year, month, day)
  if month <= 2 then year = year - 1 end
  local era = math.floor(year / 400)
  local yoe = year - era * 400
  local mp = month > 2 and month - 3 or month + 9
  local doy = math.floor((153 * mp + 2) / 5) + day - 1
  return era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
end

local function daysInMonth(year, month)
  if month == 2 then
    if (year % 4 == 0 and year % 100 ~= 0) or year % 400 == 0 then return 29 end
    return 28
  end
  if month == 4 or month == 6 or month == 9 or month == 11 then return 30 end
  return 31
end

-- The latest scheduled refill at or before 'at' (see lastScheduledRefill in lib/credit-refill.ts).
local function lastScheduledRefill(refill, at)
  if refill.interval == "daily" then return math.floor(at / DAY) * DAY end
  local refillDay = refill.refillDay or 1
  local year, month = civilFromDays(math.floor(at / DAY))
  local this = daysFromCivil(year, month, math.min(refillDay, daysInMonth(year, month))) * DAY
  if this <= at then return this end
  if month == 1 then year, month = year - 1, 12 else month = month - 1 end
  return daysFromCivil(year, month, math.min(refillDay, daysInMonth(year, month))) * DAY
end

-- A whole number written in full: Lua's own conversion (and cjson's) keeps 14 significant digits, exact below 10^14.
local function whole(value) return string.format("%.0f", value) end

-- JSON of a balance in the key store's shape; integers are written in full.
local function encodeBalance(remaining, refill, lastRefillAt)
  local json = '{"remaining":' .. whole(remaining)
  if refill then
    json = json .. ',"refill":{"interval":' .. cjson.encode(refill.interval) .. ',"amount":' .. whole(refill.amount)
    if refill.refillDay then json = json .. ',"refillDay":' .. whole(refill.refillDay) end
    json = json .. '}'
  end
  return json .. ',"lastRefillAt":' .. whole(lastRefillAt) .. '}'
end

-- A decoded balance's remaining and lastRefillAt with every refill due at 'now' applied (withRefills): a refill
-- raises the balance to its amount (it never lowers it), and several missed refills are one.
local function refilled(balance, now)
  local remaining, lastRefillAt = balance.remaining, balance.lastRefillAt
  if balance.refill then
    local due = lastScheduledRefill(balance.refill, now)
    if due > lastRefillAt then
      if remaining < balance.refill.amount then remaining = balance.refill.amount end
      lastRefillAt = due
    end
  end
  return remaining, lastRefillAt
end

-- The decision time from an argument: unix ms, or "" for the Redis server's TIME (one clock for every instance).
local function timeFrom(argument)
  if argument ~= "" then return tonumber(argument) end
  local time = redis.call("TIME")
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
`;

/**
 * How what a receipt key holds once its script execution has been settled begins: "x" when the execution had not
 * run (it never will: an execution that finds its receipt key set runs nothing, see ratelimit-script.ts), "x<n>"
 * when it had, and n credits were given back. A receipt of credits taken begins with a digit.
 */
export const SETTLED_MARK = "x";

/**
 * Gives credits back to one balance, atomically: the refills due at the decision time are applied first, exactly
 * as a spend would see them, then `amount` is added. A key without a balance (unlimited, or removed) is left
 * alone and nothing is created.
 *
 * KEYS[1]  the balance (keys.keyCredits).
 * ARGV[1]  the credits to add, a whole number.
 * ARGV[2]  now in unix ms, or "" for the Redis server's TIME.
 * Returns the balance afterwards, written in full, or "" when the key has no balance.
 */
export const REFUND_CREDITS_LUA = `${BALANCE_LUA}
local raw = redis.call("GET", KEYS[1])
if not raw then return "" end
local balance = cjson.decode(raw)
local remaining, lastRefillAt = refilled(balance, timeFrom(ARGV[2]))
remaining = remaining + tonumber(ARGV[1])
redis.call("SET", KEYS[1], encodeBalance(remaining, balance.refill, lastRefillAt))
return whole(remaining)
`;

/**
 * Settles one execution of the rate limit script whose answer never reached keygate (ratelimit-counter-store.ts),
 * atomically, in whichever order Redis runs it and that execution: when the execution ran, its receipt says what
 * it took from each balance, and that is given back (refills due first, as in REFUND_CREDITS_LUA; balances that are
 * gone are left alone); when it has not run, the receipt key is set so that it spends nothing if it ever runs.
 * Either way the receipt key then holds the SETTLED_MARK, with the credits given back, until it expires. Running
 * this again changes nothing and answers the same.
 *
 * KEYS[1]  the execution's receipt key (keys.creditReceipt).
 * KEYS[2…] the balances the execution may have spent from.
 * ARGV[1]  their 1-based positions among the execution's own KEYS, in the same order, joined by commas (a receipt
 *          names balances by those positions).
 * ARGV[2]  how long the receipt key stays, in ms.
 * ARGV[3]  now in unix ms, or "" for the Redis server's TIME (for refills).
 * Returns what the receipt key holds afterwards: "x" when the execution had not run, "x<n>" when it had and n
 * credits were given back (n written in full).
 */
export const RECONCILE_CREDITS_LUA = `${BALANCE_LUA}
local receipt = redis.call("GET", KEYS[1])
if receipt and string.sub(receipt, 1, 1) == "${SETTLED_MARK}" then return receipt end
if not receipt then
  redis.call("SET", KEYS[1], "${SETTLED_MARK}", "PX", ARGV[2])
  return "${SETTLED_MARK}"
end

local keyAt = {}
local position = 2
for index in string.gmatch(ARGV[1], "[^,]+") do
  keyAt[tonumber(index)] = KEYS[position]
  position = position + 1
end
local now = nil
local refunded = 0
for index, amount in string.gmatch(receipt, "(%d+):(%d+)") do
  local key = keyAt[tonumber(index)]
  local raw = key and redis.call("GET", key)
  if raw then
    now = now or timeFrom(ARGV[3])
    local balance = cjson.decode(raw)
    local remaining, lastRefillAt = refilled(balance, now)
    redis.call("SET", key, encodeBalance(remaining + tonumber(amount), balance.refill, lastRefillAt))
    refunded = refunded + tonumber(amount)
  end
end
local settled = "${SETTLED_MARK}" .. whole(refunded)
redis.call("SET", KEYS[1], settled, "PX", ARGV[2])
return settled
`;

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
