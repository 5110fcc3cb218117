-- KEYS[1]: the window's hash. ARGV: milliseconds to add, time to live (ms).
redis.call("HINCRBY", KEYS[1], "executionMs", ARGV[1])
redis.call("PEXPIRE", KEYS[1], ARGV[2])
return 0
