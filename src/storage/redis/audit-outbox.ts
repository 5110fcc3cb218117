import type { AuditOutbox, AuditOutboxItem } from "../audit-outbox-interfaces.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

// KEYS: the stream. ARGV: the entries, in order. One script: the entries of one group commit land together or not at all.
const APPEND = `
for i = 1, #ARGV do redis.call('XADD', KEYS[1], '*', 'e', ARGV[i]) end
return #ARGV`;

type StreamEntry = [id: string, fields: string[]];

/**
 * The audit outbox in Redis: one stream every instance appends to and every instance's pump reads (XRANGE) and
 * trims by id (XDEL) once its engine has the entries. Two pumps reading the same entries write them twice, which the
 * engine's reads count once; an entry leaves the stream only after some engine took it, so none is lost.
 */
export class RedisAuditOutbox implements AuditOutbox {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.redis = redis;
    this.keys = keys;
  }

  async append(records: readonly string[]): Promise<void> {
    if (records.length === 0) return;
    await this.redis.eval(APPEND, 1, this.keys.auditOutbox(), ...records);
  }

  async peek(max: number): Promise<AuditOutboxItem[]> {
    const entries = (await this.redis.xrange(this.keys.auditOutbox(), "-", "+", "COUNT", max)) as StreamEntry[];
    return entries.map(([handle, fields]) => ({ handle, record: fields[1] as string }));
  }

  async remove(handles: readonly string[]): Promise<void> {
    if (handles.length === 0) return;
    await this.redis.xdel(this.keys.auditOutbox(), ...handles);
  }

  describe(): string {
    return `entries wait in Redis (${this.keys.auditOutbox()}) until the engine has them`;
  }
}
