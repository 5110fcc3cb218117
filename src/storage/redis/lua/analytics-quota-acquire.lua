-- KEYS[1]: the window's hash. ARGV: query limit, execution-ms limit, time to live (ms).
-- Counts a query unless a limit is reached; returns {allowed 0|1, queries, executionMs}.
local queries = tonumber(redis.call("HGET", KEYS[1], "queries") or "0")
local executionMs = tonumber(redis.call("HGET", KEYS[1], "executionMs") or "0")
if queries >= tonumber(ARGV[1]) or executionMs >= tonumber(ARGV[2]) then
  return {0, queries, executionMs}
end
queries = redis.call("HINCRBY", KEYS[1], "queries", 1)
redis.call("PEXPIRE", KEYS[1], ARGV[3])
return {1, queries, executionMs}
