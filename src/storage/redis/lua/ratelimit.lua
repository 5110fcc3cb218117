-- The one atomic step of rate limiting: check N sliding-window limits and, only if every one passes, consume
-- them all. It runs as a single script, so instances sharing Redis can never both take the last unit, and a
-- denial by one limit consumes nothing of the others. The arithmetic is lib/sliding-window.ts's; keep them in step.
--
-- One execution may carry several such calls (a batch of the calls an instance made in the same moment). Each is
-- decided and applied on its own, in order, exactly as if it had been sent alone: a later call sees what earlier
-- ones consumed. Each key is read once per execution and its final state written once at the end; nothing is
-- written before every call has been decided, so an error leaves the keys as they were.
--
-- Each call is decided in two phases (decide everything, then consume everything). A call may carry a credit check
-- (verification's credits): the key's balance, refilled as due (lib/credit-refill.ts's arithmetic, mirrored in
-- credit-balance.lua), must cover the cost in phase 1, and is taken in phase 2 together with the limits, so neither is
-- taken alone.
--
-- Receipts: an execution that may spend credits is given a receipt key of its own, unique to it. When it takes
-- credits it writes there what it took from each balance; when it finds the key already set, it runs nothing at
-- all and answers CANCELLED_REPLY. keygate settles an execution whose answer it did not get in time with
-- reconcile-credits.lua, which gives the receipt's credits back or, when the execution has not
-- run, sets the key so it never will: a credit stays spent only for a call whose answer arrived.
--
-- KEYS      every key the batch uses, each once: counters (keys.ratelimitWindow), hashes with fields
--             s = sequence number of the fixed window last written, c = its count, p = the count of the window
--             before it; and balances (keys.keyCredits or keys.identityCredits: JSON {remaining, refill?: {interval,
--             amount, refillDay?}, lastRefillAt, lowThreshold?}, written by the key and identity stores). A counter's name holds its limit and duration, so every
--             check of one counter agrees on both. Last, when ARGV[4] is given, the execution's receipt key
--             (keys.creditReceipt). All keys share one workspace's hash tag (one Cluster slot).
-- ARGV[1]   now in unix ms, or "" to use the Redis server's TIME. Production passes "": every instance then
--             decides on one clock, so clock skew between instances cannot widen a window. Tests pass an
--             injected clock's time.
-- ARGV[2]   the number of calls in this batch.
-- ARGV[3]   every other value, whole numbers joined by commas (one argument: the client pays per argument).
--           First, per key of KEYS, in order: a counter's limit (0 blocks; at most 10^6, as the API allows, so every
--             count stays exact in Lua's numbers) and duration in ms, as its name holds
--             them (a balance: 0, 0). Sent once per key, however many calls use it.
--           Then per call: 2n + c for its n checks and c = 1 with a credit check (else 0), n triples: the
--             counter's index in KEYS, cost (0 checks without consuming) and the units to reserve, and with a
--             credit check the balance's index in KEYS and the cost. A counter may appear more than once in a
--             call; later checks see the cost taken by earlier ones.
--           Reserving: each check of a call without credit that passes may also take up to its units more for its
--             instance to admit later without asking (storage/ratelimit/reservations.ts), but only on a counter
--             already in use (its count before the call is above 0) and as long as its window stays at most half
--             used; they are consumed here like any cost. A call that asks has its checks on distinct counters.
-- ARGV[4]   only with a receipt key: how long a receipt stays, in ms. The receipt is the positions in KEYS of the
--             balances this execution took credits from and what it took from each, "position:credits" joined by
--             commas; it is written only when something was taken.
--
-- Returns one string, the values joined by commas (parseRatelimitReply reads it; one string is cheaper for the
--   client to decode than an array): now, then per call: per check: passed, remaining, sequence, [reserved],
--   [current, previous], then with a credit check: passed, remaining (-1 when the key has no balance). The call
--   passed when every check and the credit did, so that is not sent:
--   passed     1 when the check passes on its own, after the cost of earlier checks of the call on the same key
--              (the credit's: when the balance covers the cost, or the key has none),
--   remaining  units left after the call (and its reservation); when the call is denied nothing was consumed, so
--              it is the room the window had before the call,
--   sequence   the fixed window decided in (reset = (sequence + 1) × duration),
--   reserved   only for a check that asked to reserve: the units reserved for the caller's instance (maybe 0),
--   current, previous  only when remaining is 0: the counts of that window and the one before, after the call
--              (for local denials, storage/ratelimit/exhausted-windows.ts, which remembers exhausted windows only).
-- A counter expires when the window after the one it was last written in ends (at most 2 × duration after a
-- write): then neither of its counts can matter. Its expiry is set when a write starts a window.
-- An execution that found its receipt key set answers CANCELLED_REPLY alone.
--
-- Loaded after credit-balance.lua, whose functions it uses.
local keyCount = #KEYS
local receipt = nil
if ARGV[4] then
  receipt = KEYS[keyCount]
  keyCount = keyCount - 1
  if redis.call("EXISTS", receipt) == 1 then return "cancelled" end
end

local now = timeFrom(ARGV[1])

-- ARGV[3]'s numbers: each key's limit and duration (numbers[2k - 1] and numbers[2k]; balances 0, 0), then the calls.
-- Read as a JSON array (cjson parses in C; see bench/README.md).
local numbers = cjson.decode("[" .. ARGV[3] .. "]")
local function limitOf(index) return numbers[2 * index - 1] end
local function durationOf(index) return numbers[2 * index] end


-- What the batch has read and decided so far, per index in KEYS; written back once, at the end.
-- A counter, read once: its window at 'now' (sequence, the time 'at' it is decided at, the counts current and
-- previous, and 'carried': the part of previous that still counts), stored = the window as read (nil: none),
-- 'taken' by the call being decided and not yet consumed, and whether the batch changed it. The window is the
-- same for every call of the batch ('now' is), so it is worked out once; consuming only adds to 'current'.
local counters = {}
local function counterAt(index)
  local counter = counters[index]
  if counter == nil then
    local stored = redis.call("HMGET", KEYS[index], "s", "c", "p")
    local s = tonumber(stored[1])
    local duration = durationOf(index)
    local sequence = math.floor(now / duration)
    local at = now
    -- A clock that reads earlier than a stored window counts from that window's start: it never admits more.
    if s ~= nil and s > sequence then
      sequence = s
      at = sequence * duration
    end
    local current, previous = 0, 0
    if s == sequence then
      current, previous = tonumber(stored[2]) or 0, tonumber(stored[3]) or 0
    elseif s == sequence - 1 then
      previous = tonumber(stored[2]) or 0
    end
    -- The sliding window is the last 'duration' ms up to 'at' inclusive: the current window so far and the
    -- last (duration - elapsed - 1) ms of the previous one, whose count is taken as evenly spread.
    local elapsed = at - sequence * duration
    counter = {
      stored = s, sequence = sequence, at = at, duration = duration, current = current, previous = previous,
      carried = math.floor(previous * (duration - elapsed - 1) / duration), taken = 0, written = false,
    }
    counters[index] = counter
  end
  return counter
end

-- A balance: remaining, refill, lastRefillAt as stored, or missing = true when the key has no balance.
local balances = {}
local function balanceAt(index)
  local balance = balances[index]
  if balance == nil then
    local raw = redis.call("GET", KEYS[index])
    if raw then
      local stored = cjson.decode(raw)
      balance = {
        remaining = stored.remaining, refill = stored.refill, lastRefillAt = stored.lastRefillAt, lowThreshold = stored.lowThreshold,
        written = false, spent = 0,
      }
    else
      balance = { missing = true }
    end
    balances[index] = balance
  end
  return balance
end

-- Per check of the call being decided, overwritten call after call (no tables made per call): whether it
-- passes, its counter, the usage before it (base: before this call; before: with the call's earlier checks),
-- its limit, cost, the units it asks to reserve and those reserved.
local checkOk, checkCounter, checkBase, checkBefore, checkLimit, checkCost, checkReserve, checkReserved = {}, {}, {}, {}, {}, {}, {}, {}

local reply = { now }
local replied = 1
local nextArg = 1 + 2 * keyCount
for call = 1, tonumber(ARGV[2]) do
  local header = numbers[nextArg]
  local checks = math.floor(header / 2)
  local hasCredit = header % 2 == 1
  nextArg = nextArg + 1

  -- Phase 1: decide each check on its counter's usage, with the cost the call's earlier checks took from it.
  local all = true
  for i = 1, checks do
    local index = numbers[nextArg]
    local cost = numbers[nextArg + 1]
    local reserve = numbers[nextArg + 2]
    nextArg = nextArg + 3
    local limit = limitOf(index)
    local counter = counterAt(index)
    local base = counter.current + counter.carried
    local before = base + counter.taken
    local ok = limit > 0 and before + cost <= limit
    if ok then
      counter.taken = counter.taken + cost
    else
      all = false
    end
    checkOk[i], checkCounter[i], checkBase[i], checkBefore[i] = ok, counter, base, before
    checkLimit[i], checkCost[i], checkReserve[i], checkReserved[i] = limit, cost, reserve, 0
  end

  -- The credit check: the balance, with due refills applied, must cover the cost (0 always passes).
  local balance, creditCost, creditOk, creditRemaining, creditLastRefillAt = nil, 0, true, nil, nil
  if hasCredit then
    balance = balanceAt(numbers[nextArg])
    creditCost = numbers[nextArg + 1]
    nextArg = nextArg + 2
    if not balance.missing then
      creditRemaining, creditLastRefillAt = refilled(balance, now)
      creditOk = creditCost == 0 or creditRemaining >= creditCost
      if not creditOk then all = false end
    end
  end

  -- Phase 2: only when every check passed, consume them all (in the batch's state; written at the end), with the
  -- reservations a call without credit asked for, each as far as its window stays at most half used, and only on a
  -- counter that was in use already: one called once (a new identifier per request) would leave units nobody admits.
  if all then
    if not hasCredit then
      for i = 1, checks do
        if checkReserve[i] > 0 and checkBefore[i] > 0 then
          local room = math.floor(checkLimit[i] / 2) - (checkBefore[i] + checkCost[i])
          if room > 0 then
            checkReserved[i] = math.min(checkReserve[i], room)
            checkCounter[i].taken = checkCounter[i].taken + checkReserved[i]
          end
        end
      end
    end
    if creditRemaining and (creditCost > 0 or creditLastRefillAt ~= balance.lastRefillAt) then
      creditRemaining = creditRemaining - creditCost
      balance.remaining = creditRemaining
      balance.lastRefillAt = creditLastRefillAt
      balance.written = true
      balance.spent = balance.spent + creditCost
    end
  end
  -- Each counter's take is consumed once (a counter may back several checks), or dropped when the call is denied.
  for i = 1, checks do
    local counter = checkCounter[i]
    if counter.taken > 0 then
      if all then
        counter.current = counter.current + counter.taken
        counter.written = true
      end
      counter.taken = 0
    end
  end

  for i = 1, checks do
    local counter = checkCounter[i]
    local used = checkBase[i]
    if all then used = checkBefore[i] + checkCost[i] + checkReserved[i] end
    local remaining = math.max(0, checkLimit[i] - used)
    reply[replied + 1] = checkOk[i] and 1 or 0
    reply[replied + 2] = remaining
    reply[replied + 3] = counter.sequence
    replied = replied + 3
    if checkReserve[i] > 0 then
      reply[replied + 1] = checkReserved[i]
      replied = replied + 1
    end
    if remaining == 0 then
      reply[replied + 1] = counter.current
      reply[replied + 2] = counter.previous
      replied = replied + 2
    end
  end
  if hasCredit then
    reply[replied + 1] = creditOk and 1 or 0
    -- A balance may exceed the 14 digits Lua writes exactly (credits go up to 2^53): written in full.
    reply[replied + 2] = creditRemaining and whole(creditRemaining) or -1
    replied = replied + 2
  end
end

for index, counter in pairs(counters) do
  if counter.written then
    redis.call("HSET", KEYS[index], "s", counter.sequence, "c", counter.current, "p", counter.previous)
    -- A counter is of no use once the window after its own has ended, so it expires then; writes within the
    -- same window keep that expiry and need no command of their own.
    if counter.stored ~= counter.sequence then
      redis.call("PEXPIRE", KEYS[index], (counter.sequence + 2) * counter.duration - counter.at)
    end
  end
end
local spent = {}
for index, balance in pairs(balances) do
  if balance.written then
    redis.call("SET", KEYS[index], encodeBalance(balance.remaining, balance.refill, balance.lastRefillAt, balance.lowThreshold))
    if balance.spent > 0 then spent[#spent + 1] = index .. ":" .. whole(balance.spent) end
  end
end
-- The receipt: what this execution took from each balance (by position in KEYS), kept ARGV[4] ms.
if receipt and #spent > 0 then
  redis.call("SET", receipt, table.concat(spent, ","), "PX", ARGV[4])
end
return table.concat(reply, ",")
