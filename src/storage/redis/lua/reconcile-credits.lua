-- Settles one execution of the rate limit script whose answer never reached keygate (storage/redis/ratelimit-counter-store.ts),
-- atomically, in whichever order Redis runs it and that execution: when the execution ran, its receipt says what
-- it took from each balance, and that is given back (refills due first, as in refund-credits.lua; balances that are
-- gone are left alone); when it has not run, the receipt key is set so that it spends nothing if it ever runs.
-- Either way the receipt key then holds the SETTLED_MARK, with the credits given back, until it expires. Running
-- this again changes nothing and answers the same.
--
-- KEYS[1]  the execution's receipt key (keys.creditReceipt).
-- KEYS[2…] the balances the execution may have spent from.
-- ARGV[1]  their 1-based positions among the execution's own KEYS, in the same order, joined by commas (a receipt
--          names balances by those positions).
-- ARGV[2]  how long the receipt key stays, in ms.
-- ARGV[3]  now in unix ms, or "" for the Redis server's TIME (for refills).
-- Returns what the receipt key holds afterwards: "x" when the execution had not run, "x<n>" when it had and n
-- credits were given back (n written in full).
--
-- Loaded after credit-balance.lua, whose functions it uses.
local receipt = redis.call("GET", KEYS[1])
if receipt and string.sub(receipt, 1, 1) == "x" then return receipt end
if not receipt then
  redis.call("SET", KEYS[1], "x", "PX", ARGV[2])
  return "x"
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
    redis.call("SET", key, encodeBalance(remaining + tonumber(amount), balance.refill, lastRefillAt, balance.lowThreshold))
    refunded = refunded + tonumber(amount)
  end
end
local settled = "x" .. whole(refunded)
redis.call("SET", KEYS[1], settled, "PX", ARGV[2])
return settled
