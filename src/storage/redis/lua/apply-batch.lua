-- Applies a batch of writes only if every check holds, in one script, so writes that touch several keys are
-- atomic. All keys of a batch must share a hash tag (see keys.ts) for Redis Cluster.
--
-- KEYS: the keys the batch reads or writes.
-- ARGV[1]: JSON { c: [[keyIndex, check, arg?, arg?]], w: [[op, keyIndex, arg?, arg?]] }
--   checks: "absent", "present", "equals" (value); on one field of a hash: "fieldAbsent" (field), "fieldEquals"
--   (field, value).
--   ops: "set" (value), "del", "zadd" (member, score 0), "zrem" (member), "hset" (field, value), "hdel" (field).
-- Returns 0 when applied, else the 1-based index of the first check that failed (nothing is written then).
local spec = cjson.decode(ARGV[1])
for i, check in ipairs(spec.c) do
  local key = KEYS[check[1]]
  local kind = check[2]
  if kind == "absent" then
    if redis.call("EXISTS", key) == 1 then return i end
  elseif kind == "present" then
    if redis.call("EXISTS", key) == 0 then return i end
  elseif kind == "equals" then
    if redis.call("GET", key) ~= check[3] then return i end
  elseif kind == "fieldAbsent" then
    if redis.call("HEXISTS", key, check[3]) == 1 then return i end
  elseif kind == "fieldEquals" then
    if redis.call("HGET", key, check[3]) ~= check[4] then return i end
  end
end
for _, write in ipairs(spec.w) do
  local op, key = write[1], KEYS[write[2]]
  if op == "set" then redis.call("SET", key, write[3])
  elseif op == "del" then redis.call("DEL", key)
  elseif op == "zadd" then redis.call("ZADD", key, 0, write[3])
  elseif op == "zrem" then redis.call("ZREM", key, write[3])
  elseif op == "hset" then redis.call("HSET", key, write[3], write[4])
  elseif op == "hdel" then redis.call("HDEL", key, write[3])
  end
end
return 0
