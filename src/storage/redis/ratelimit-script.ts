import type { Redis, Result } from "ioredis";

/**
 * The one atomic step of rate limiting: check N sliding-window limits and, only if every one passes, consume
 * them all. It runs as a single script, so instances sharing Redis can never both take the last unit, and a
 * denial by one limit consumes nothing of the others. The arithmetic is lib/sliding-window.ts's; keep them in step.
 *
 * One execution may carry several such calls (a batch of the calls an instance made in the same moment). Each is
 * decided and applied on its own, in order, exactly as if it had been sent alone: a later call sees what earlier
 * ones consumed. Batching only saves round trips.
 *
 * Each call is written in two phases (decide everything, then write everything). A call may carry a credit check
 * (verification's credits): the key's balance, refilled as due (lib/credit-refill.ts's arithmetic, mirrored below),
 * must cover the cost in phase 1, and is taken in phase 2 together with the limits, so neither is taken alone.
 *
 * KEYS      the counters of every check of every call, in order (keys.ratelimitWindow). Each is a hash with fields
 *             s = sequence number of the fixed window last written, c = its count, p = the count of the window
 *             before it. A key names its limit and duration, so checks of one key agree on both. A key may
 *             appear more than once in a call; later checks see the cost taken by earlier ones. All keys share
 *             one workspace's hash tag (one Cluster slot).
 * ARGV[1]   now in unix ms, or "" to use the Redis server's TIME. Production passes "": every instance then
 *             decides on one clock, so clock skew between instances cannot widen a window. Tests pass an
 *             injected clock's time.
 * ARGV[2]   the number of calls in this batch.
 * then per call: its number of checks n, whether it has a credit check (1 or 0), n triples: limit (0 blocks),
 *             duration in ms and cost (0 checks without consuming), and with a credit check its cost.
 * KEYS of a call: its n counters, then with a credit check the key's balance (keys.keyCredits: JSON
 *             {remaining, refill?: {interval, amount, refillDay?}, lastRefillAt}, written by the key store).
 *
 * Returns { now, then per call: passed (1 or 0), then per check: passed, remaining, sequence, current, previous,
 *   then with a credit check: passed, remaining (-1 when the key has no balance) },
 *   passed     (the call's) 1 when every check passed and all were consumed; (a check's) 1 when it passes on its
 *              own, after the cost of earlier checks of the call on the same key,
 *   remaining  units left after the call; when the call is denied nothing was consumed, so it is the room the
 *              window had before the call,
 *   sequence   the fixed window decided in (reset = (sequence + 1) × duration),
 *   current, previous  the counts of that window and the one before, after the call (for the local fast path).
 * A counter expires when the window after the one it was last written in ends (at most 2 × duration after a
 * write): then neither of its counts can matter. Its expiry is set when it starts a window.
 */
export const RATELIMIT_LUA = `
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

-- JSON of a balance in the key store's shape; integers are written in full (cjson would round past 14 digits).
local function encodeBalance(remaining, refill, lastRefillAt)
  local json = '{"remaining":' .. string.format("%.0f", remaining)
  if refill then
    json = json .. ',"refill":{"interval":' .. cjson.encode(refill.interval) .. ',"amount":' .. string.format("%.0f", refill.amount)
    if refill.refillDay then json = json .. ',"refillDay":' .. string.format("%.0f", refill.refillDay) end
    json = json .. '}'
  end
  return json .. ',"lastRefillAt":' .. string.format("%.0f", lastRefillAt) .. '}'
end

local now
if ARGV[1] == "" then
  local time = redis.call("TIME")
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
else
  now = tonumber(ARGV[1])
end

local reply = { now }
local nextKey = 1
local nextArg = 3
for call = 1, tonumber(ARGV[2]) do
  local checks = tonumber(ARGV[nextArg])
  local hasCredit = ARGV[nextArg + 1] == "1"
  nextArg = nextArg + 2

  -- Phase 1: decide. Per distinct key: its window, the estimate before this call, and the cost taken so far.
  local counters = {}
  local decisions = {}
  local all = true
  for i = 1, checks do
    local key = KEYS[nextKey]
    local limit = tonumber(ARGV[nextArg])
    local duration = tonumber(ARGV[nextArg + 1])
    local cost = tonumber(ARGV[nextArg + 2])
    nextKey = nextKey + 1
    nextArg = nextArg + 3
    local counter = counters[key]
    if counter == nil then
      local stored = redis.call("HMGET", key, "s", "c", "p")
      local storedSequence = tonumber(stored[1])
      local sequence = math.floor(now / duration)
      local at = now
      -- A clock that reads earlier than a stored window counts from that window's start: it never admits more.
      if storedSequence ~= nil and storedSequence > sequence then
        sequence = storedSequence
        at = sequence * duration
      end
      local current, previous = 0, 0
      if storedSequence == sequence then
        current, previous = tonumber(stored[2]), tonumber(stored[3])
      elseif storedSequence == sequence - 1 then
        previous = tonumber(stored[2])
      end
      -- The sliding window is the last 'duration' ms up to 'at' inclusive: the current window so far and the
      -- last (duration - elapsed - 1) ms of the previous one, whose count is taken as evenly spread.
      local elapsed = at - sequence * duration
      local base = current + math.floor(previous * (duration - elapsed - 1) / duration)
      counter = { sequence = sequence, current = current, previous = previous, base = base, taken = 0, duration = duration, at = at, stored = storedSequence }
      counters[key] = counter
    end
    local before = counter.base + counter.taken
    local ok = limit > 0 and before + cost <= limit
    if ok then
      counter.taken = counter.taken + cost
    else
      all = false
    end
    decisions[i] = { ok = ok, before = before, limit = limit, cost = cost, counter = counter }
  end

  -- The credit check: the balance, with due refills applied, must cover the cost (0 always passes).
  local credit = nil
  if hasCredit then
    credit = { key = KEYS[nextKey], cost = tonumber(ARGV[nextArg]), ok = true }
    nextKey = nextKey + 1
    nextArg = nextArg + 1
    local raw = redis.call("GET", credit.key)
    if raw then
      local balance = cjson.decode(raw)
      credit.remaining = balance.remaining
      credit.lastRefillAt = balance.lastRefillAt
      credit.refill = balance.refill
      if balance.refill then
        local due = lastScheduledRefill(balance.refill, now)
        if due > balance.lastRefillAt then
          if credit.remaining < balance.refill.amount then credit.remaining = balance.refill.amount end
          credit.lastRefillAt = due
        end
      end
      credit.changed = credit.lastRefillAt ~= balance.lastRefillAt
      credit.ok = credit.cost == 0 or credit.remaining >= credit.cost
      if not credit.ok then all = false end
    end
  end

  -- Phase 2: only when every check passed, consume them all.
  if all then
    if credit and credit.remaining and (credit.cost > 0 or credit.changed) then
      credit.remaining = credit.remaining - credit.cost
      redis.call("SET", credit.key, encodeBalance(credit.remaining, credit.refill, credit.lastRefillAt))
    end
    for key, counter in pairs(counters) do
      if counter.taken > 0 then
        counter.current = counter.current + counter.taken
        redis.call("HSET", key, "s", counter.sequence, "c", counter.current, "p", counter.previous)
        -- A counter is of no use once the window after its own has ended, so it expires then; writes within the
        -- same window keep that expiry and need no command of their own.
        if counter.stored ~= counter.sequence then
          redis.call("PEXPIRE", key, (counter.sequence + 2) * counter.duration - counter.at)
        end
      end
    end
  end

  reply[#reply + 1] = all and 1 or 0
  for i = 1, checks do
    local decision = decisions[i]
    local counter = decision.counter
    local used = counter.base
    if all then used = decision.before + decision.cost end
    reply[#reply + 1] = decision.ok and 1 or 0
    reply[#reply + 1] = math.max(0, decision.limit - used)
    reply[#reply + 1] = counter.sequence
    reply[#reply + 1] = counter.current
    reply[#reply + 1] = counter.previous
  end
  if credit then
    reply[#reply + 1] = credit.ok and 1 or 0
    reply[#reply + 1] = credit.remaining or -1
  end
end
return reply
`;

/** Values per check in the script's reply, after the first two. */
export const RATELIMIT_REPLY_STRIDE = 5;

declare module "ioredis" {
  interface RedisCommander<Context> {
    keygateRatelimit(numberOfKeys: number, ...args: string[]): Result<number[], Context>;
  }
}

/** The script's command name on a connection. */
export const RATELIMIT_COMMAND = "keygateRatelimit";

/** Registers the script on a connection; ioredis sends EVALSHA and loads the script again after NOSCRIPT. */
export function defineRatelimitCommand(redis: Redis): void {
  if (typeof (redis as Partial<Redis>).keygateRatelimit === "function") return;
  redis.defineCommand(RATELIMIT_COMMAND, { lua: RATELIMIT_LUA });
}
