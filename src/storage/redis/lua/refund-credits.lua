-- Gives credits back to one balance, atomically: the refills due at the decision time are applied first, exactly
-- as a spend would see them, then `amount` is added. A key without a balance (unlimited, or removed) is left
-- alone and nothing is created.
--
-- KEYS[1]  the balance (keys.keyCredits or keys.identityCredits).
-- ARGV[1]  the credits to add, a whole number.
-- ARGV[2]  now in unix ms, or "" for the Redis server's TIME.
-- Returns the balance afterwards, written in full, or "" when the key has no balance.
--
-- Loaded after credit-balance.lua, whose functions it uses.
local raw = redis.call("GET", KEYS[1])
if not raw then return "" end
local balance = cjson.decode(raw)
local remaining, lastRefillAt = refilled(balance, timeFrom(ARGV[2]))
remaining = remaining + tonumber(ARGV[1])
redis.call("SET", KEYS[1], encodeBalance(remaining, balance.refill, lastRefillAt, balance.lowThreshold))
return whole(remaining)
