import type { AuditOutbox, AuditOutboxItem } from "../audit-outbox-interfaces.js";
import type { RedisGuard } from "./guard.js";
import type { RedisKeys } from "./keys.js";
import { type ReplicaWaitSettings, WriteNotReplicatedError } from "./replica-wait.js";
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
  private readonly guard: RedisGuard;
  private readonly keys: RedisKeys;
  private readonly replicaWait: ReplicaWaitSettings | undefined;

  /**
   * Every call runs through `guard`, as the record stores' do. With `replicaWait` (storage.redis.waitForReplicas), an
   * append waits for the replicas as a management write does.
   */
  constructor(redis: RedisClient, guard: RedisGuard, keys: RedisKeys, replicaWait?: ReplicaWaitSettings) {
    this.redis = redis;
    this.guard = guard;
    this.keys = keys;
    this.replicaWait = replicaWait;
  }

  async append(records: readonly string[]): Promise<void> {
    if (records.length === 0) return;
    const stream = this.keys.auditOutbox();
    const replicaWait = this.replicaWait;
    if (!replicaWait) {
      await this.guard.run("auditAppend", () => this.redis.eval(APPEND, 1, stream, ...records));
      return;
    }
    const replies = await this.guard.run(
      "auditAppend",
      async () =>
        (await this.redis
          .pipeline()
          .eval(APPEND, 1, stream, ...records)
          .wait(replicaWait.replicas, replicaWait.timeoutMs)
          .exec()) ?? [],
    );
    const [[appendError] = [], [waitError, confirmed] = []] = replies;
    if (appendError) throw appendError;
    if (waitError) throw waitError;
    // Appended but not confirmed: the caller appends again, and the reads count an entry written twice once.
    if ((confirmed as number) < replicaWait.replicas) throw new WriteNotReplicatedError(confirmed as number, replicaWait);
  }

  async peek(max: number): Promise<AuditOutboxItem[]> {
    const entries = (await this.guard.run("auditPeek", () =>
      this.redis.xrange(this.keys.auditOutbox(), "-", "+", "COUNT", max),
    )) as StreamEntry[];
    return entries.map(([handle, fields]) => ({ handle, record: fields[1] as string }));
  }

  async remove(handles: readonly string[]): Promise<void> {
    if (handles.length === 0) return;
    await this.guard.run("auditRemove", () => this.redis.xdel(this.keys.auditOutbox(), ...handles));
  }

  describe(): string {
    return `entries wait in Redis (${this.keys.auditOutbox()}) until the engine has them`;
  }
}
