import type { OutboxEntry, OutboxLease, WebhookOutbox } from "../webhook-interfaces.js";
import type { OutboxMessage } from "../webhook-records.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

/** The consumer group every instance reads the endpoint streams in. */
export const DELIVERERS = "deliverers";

// KEYS: due, then each message's stream. ARGV: now, then each message's endpoint id and JSON. The group is made
// with the stream (from its start), so no message can come before it; a queue already due or backing off keeps its time.
const ENQUEUE = `
for i = 2, #KEYS do
  redis.pcall('XGROUP', 'CREATE', KEYS[i], '${DELIVERERS}', '0', 'MKSTREAM')
  redis.call('XADD', KEYS[i], '*', 'm', ARGV[2 * i - 1])
  redis.call('ZADD', KEYS[1], 'NX', ARGV[1], ARGV[2 * i - 2])
end
return 1`;

// KEYS: due. ARGV: now, owner, lease ms, max, lease key prefix. Leases queues due by now that nobody holds.
const LEASE = `
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[4]) * 4)
local leased = {}
for _, endpoint in ipairs(due) do
  if #leased >= tonumber(ARGV[4]) then break end
  if redis.call('SET', ARGV[5] .. endpoint, ARGV[2], 'NX', 'PX', ARGV[3]) then table.insert(leased, endpoint) end
end
return leased`;

// KEYS: due, stream, lease. ARGV: endpoint id, owner, next attempt. The check and the removal are one step, so a
// message enqueued meanwhile is never left in a queue that is not due.
const RELEASE = `
if redis.call('GET', KEYS[3]) == ARGV[2] then redis.call('DEL', KEYS[3]) end
if redis.call('XLEN', KEYS[2]) == 0 then redis.call('ZREM', KEYS[1], ARGV[1]) else redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1]) end
return 1`;

// KEYS: the stream. ARGV: entry ids. Acknowledged and removed in one step.
const ACK = `redis.call('XACK', KEYS[1], '${DELIVERERS}', unpack(ARGV))
return redis.call('XDEL', KEYS[1], unpack(ARGV))`;

type StreamEntry = [id: string, fields: string[]];

/**
 * The outbox in Redis: one stream per endpoint read through the `deliverers` consumer group, a sorted set of the
 * queues due and when, and a lease per queue (SET NX PX) so one instance at a time delivers an endpoint's messages, in
 * order. A message stays in the group's pending list until acknowledged; whoever leases the queue after a deliverer
 * died takes its pending messages over (XAUTOCLAIM) before reading new ones.
 */
export class RedisWebhookOutbox implements WebhookOutbox {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.redis = redis;
    this.keys = keys;
  }

  async enqueue(messages: readonly OutboxMessage[], now: number): Promise<void> {
    if (messages.length === 0) return;
    const keys = [this.keys.webhookDue(), ...messages.map((message) => this.keys.webhookQueue(message.endpointId))];
    const args = [String(now), ...messages.flatMap((message) => [message.endpointId, JSON.stringify(message)])];
    await this.redis.eval(ENQUEUE, keys.length, ...keys, ...args);
  }

  async lease(owner: string, now: number, leaseMs: number, max: number): Promise<OutboxLease[]> {
    const leasePrefix = this.keys.webhookLease("");
    const ids = (await this.redis.eval(
      LEASE,
      1,
      this.keys.webhookDue(),
      String(now),
      owner,
      String(leaseMs),
      String(max),
      leasePrefix,
    )) as string[];
    return ids.map((endpointId) => ({ endpointId, owner }));
  }

  async head(lease: OutboxLease, count: number): Promise<OutboxEntry[]> {
    const stream = this.keys.webhookQueue(lease.endpointId);
    // Pending messages first, whoever read them: the lease says nobody else is delivering this queue now.
    const claimed = (await this.redis
      .call("XAUTOCLAIM", stream, DELIVERERS, lease.owner, "0", "0-0", "COUNT", String(count))
      .catch(noGroup)) as [string, StreamEntry[], string[]] | null;
    const entries = (claimed?.[1] ?? []).filter((entry) => entry[1] !== null).map(toEntry);
    if (entries.length < count) {
      const read = (await this.redis
        .call("XREADGROUP", "GROUP", DELIVERERS, lease.owner, "COUNT", String(count - entries.length), "STREAMS", stream, ">")
        .catch(noGroup)) as unknown[] | null;
      for (const entry of streamEntries(read)) entries.push(toEntry(entry));
    }
    return entries;
  }

  async ack(lease: OutboxLease, entryIds: readonly string[]): Promise<void> {
    if (entryIds.length === 0) return;
    const stream = this.keys.webhookQueue(lease.endpointId);
    await this.redis.eval(ACK, 1, stream, ...entryIds);
  }

  async release(lease: OutboxLease, nextAt: number): Promise<void> {
    const keys = [this.keys.webhookDue(), this.keys.webhookQueue(lease.endpointId), this.keys.webhookLease(lease.endpointId)];
    await this.redis.eval(RELEASE, 3, ...keys, lease.endpointId, lease.owner, String(nextAt));
  }

  async drop(endpointId: string): Promise<void> {
    await this.redis.del(this.keys.webhookQueue(endpointId), this.keys.webhookLease(endpointId));
    await this.redis.zrem(this.keys.webhookDue(), endpointId);
  }
}

/** XREADGROUP's entries of its one stream: `[[stream, entries]]` over RESP2, `[stream, entries]` from a RESP3 map. */
function streamEntries(read: unknown[] | null): StreamEntry[] {
  if (!read || read.length === 0) return [];
  const pair = (Array.isArray(read[0]) ? read[0] : read) as [string, StreamEntry[]];
  return pair[1] ?? [];
}

function toEntry([entryId, fields]: StreamEntry): OutboxEntry {
  return { entryId, message: JSON.parse(fields[1] as string) as OutboxMessage };
}

/** A queue dropped since it was leased has no stream and no group left: nothing to deliver. */
function noGroup(error: unknown): null {
  if (error instanceof Error && error.message.includes("NOGROUP")) return null;
  throw error;
}
