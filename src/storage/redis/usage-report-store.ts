import type { UsageReportCommit, UsageReportStore } from "../usage-report-interfaces.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

// KEYS: the lease. ARGV: owner, now, ttl ms, cleanup ttl ms. The lease is a hash {owner, until} judged by the caller's
// clock; the key's own expiry only cleans up after a producer that never came back.
const LEASE = `
local held = redis.call('HMGET', KEYS[1], 'owner', 'until')
if held[1] and held[1] ~= ARGV[1] and tonumber(held[2]) > tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'until', tonumber(ARGV[2]) + tonumber(ARGV[3]))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1`;

// KEYS: the lease. ARGV: owner.
const RELEASE = `
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1`;

// KEYS: the lease, the progress hash, then one hash per period reported. ARGV: owner, now, endpoint id, from ('' for
// none), to, keep ms, then for each period hash its number of subjects and their subject/numbers pairs.
const COMMIT = `
local held = redis.call('HMGET', KEYS[1], 'owner', 'until')
if held[1] ~= ARGV[1] or tonumber(held[2]) <= tonumber(ARGV[2]) then return 0 end
if (redis.call('HGET', KEYS[2], ARGV[3]) or '') ~= ARGV[4] then return 0 end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[5])
local at = 7
for i = 3, #KEYS do
  local count = tonumber(ARGV[at])
  for j = 1, count do redis.call('HSET', KEYS[i], ARGV[at + 2 * j - 1], ARGV[at + 2 * j]) end
  if count > 0 then redis.call('PEXPIRE', KEYS[i], ARGV[6]) end
  at = at + 1 + 2 * count
end
return 1`;

/** A lease left by a producer that never came back is removed after this long (its time is judged by `until`). */
const LEASE_CLEANUP_MS = 24 * 3_600_000;

/**
 * Usage report progress in Redis, every key under one hash tag so that a commit checks the lease and the progress
 * and writes both in one script (Cluster-safe): a producer that lost its lease can never move an endpoint on.
 */
export class RedisUsageReportStore implements UsageReportStore {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.redis = redis;
    this.keys = keys;
  }

  async lease(owner: string, now: number, ttlMs: number): Promise<boolean> {
    const cleanup = Math.max(LEASE_CLEANUP_MS, ttlMs * 2);
    const taken = await this.redis.eval(LEASE, 1, this.keys.usageReportLease(), owner, String(now), String(ttlMs), String(cleanup));
    return taken === 1;
  }

  async release(owner: string): Promise<void> {
    await this.redis.eval(RELEASE, 1, this.keys.usageReportLease(), owner);
  }

  async progress(endpointId: string): Promise<number | null> {
    const value = await this.redis.hget(this.keys.usageReportProgress(), endpointId);
    return value === null ? null : Number(value);
  }

  async commit(commit: UsageReportCommit): Promise<boolean> {
    const keys = [
      this.keys.usageReportLease(),
      this.keys.usageReportProgress(),
      ...commit.reported.map((period) => this.keys.usageReported(commit.endpointId, period.periodStart)),
    ];
    const args = [
      commit.owner,
      String(commit.now),
      commit.endpointId,
      commit.from === null ? "" : String(commit.from),
      String(commit.to),
      String(Math.max(1, Math.ceil(commit.keepMs))),
      ...commit.reported.flatMap((period) => {
        const pairs = Object.entries(period.subjects);
        return [String(pairs.length), ...pairs.flat()];
      }),
    ];
    return (await this.redis.eval(COMMIT, keys.length, ...keys, ...args)) === 1;
  }

  async reported(endpointId: string, periodStart: number): Promise<Record<string, string>> {
    return this.redis.hgetall(this.keys.usageReported(endpointId, periodStart));
  }
}
