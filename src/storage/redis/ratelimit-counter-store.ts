import type { Redis } from "ioredis";
import { LRUCache } from "lru-cache";
import type { Clock } from "../../lib/clock.js";
import { countsFor, estimateUsed, windowEnd, windowSequence, type StoredWindow } from "../../lib/sliding-window.js";
import type { CounterOutcome, CreditCheck, RatelimitCounterStore, WindowCheck, WindowResult } from "../interfaces.js";
import type { RedisGuard } from "./guard.js";
import type { RedisKeys } from "./keys.js";
import { RATELIMIT_REPLY_STRIDE, defineRatelimitCommand } from "./ratelimit-script.js";

/** Exhausted windows this instance remembers for its fast path (least recently used are forgotten first). */
const KNOWN_WINDOWS_MAX = 100_000;

/** Key uses (checks and balances) one script execution may carry at most; a bigger batch is split, so no execution
 * holds Redis for long. */
const MAX_KEYS_PER_EXECUTION = 1_000;

export interface CounterStoreStats {
  /** Script executions (round trips to Redis); one may carry several calls. */
  scriptCalls: number;
  /** Calls decided by Redis. */
  redisDecisions: number;
  /** Calls denied without asking Redis (the window was known to be exhausted, or the limit is 0). */
  localDenials: number;
}

interface PendingCall {
  /** The call's counters, then its balance when it has a credit check. */
  keys: string[];
  checks: readonly WindowCheck[];
  credit: CreditCheck | undefined;
  resolve(outcome: CounterOutcome): void;
  reject(error: unknown): void;
}

/** Calls waiting for the next execution: all of one workspace (one hash slot) and one time argument. */
interface Batch {
  now: number | undefined;
  calls: PendingCall[];
}

/**
 * Counters in Redis, decided by the Lua script of ratelimit-script.ts, behind the connection's breaker.
 *
 * Batching, with no accuracy cost: calls made in the same turn of the event loop (concurrent requests) go to Redis
 * together, one execution per workspace, and are decided one after the other in the order they were made, each
 * on its own, as if sent alone. It saves round trips and per-command work on both sides; a call waits at most
 * for the current turn of the event loop to end.
 *
 * Fast path, with no accuracy cost: counts only grow within a window and the estimate only shrinks as time
 * passes, so the counts this instance last saw are lower bounds of the true ones. When a single check's window
 * is exhausted even by those lower bounds, the call is denied here without a round trip, with remaining 0 as
 * Redis would say. For the same reason only windows seen exhausted (remaining 0) are worth remembering: counts
 * below the limit can never prove a later denial. Time for this uses the offset to Redis's clock measured from the
 * send time of the last reply, which errs towards the future, where estimates are lower: a local denial is one
 * Redis would also give. Everything else, and every call that may pass, goes to Redis.
 */
export class RedisRatelimitCounterStore implements RatelimitCounterStore {
  readonly stats: CounterStoreStats = { scriptCalls: 0, redisDecisions: 0, localDenials: 0 };
  private readonly redis: Redis;
  private readonly keys: RedisKeys;
  private readonly guard: RedisGuard;
  private readonly clock: Clock;
  private readonly known = new LRUCache<string, StoredWindow>({ max: KNOWN_WINDOWS_MAX });
  private readonly batches = new Map<string, Batch>();
  private flushScheduled = false;
  /** Redis time minus local time, measured at the last reply decided on Redis time; undefined before the first. */
  private redisClockOffsetMs: number | undefined;

  constructor(redis: Redis, keys: RedisKeys, guard: RedisGuard, clock: Clock) {
    this.redis = redis;
    this.keys = keys;
    this.guard = guard;
    this.clock = clock;
    defineRatelimitCommand(redis);
    // Counts seen before an outage may be gone if Redis restarted without its data; they are no lower bounds then.
    guard.breaker.onStateChange((state) => {
      if (state === "closed") this.known.clear();
    });
  }

  checkAndConsume(workspaceId: string, checks: readonly WindowCheck[], now?: number, credit?: CreditCheck): Promise<CounterOutcome> {
    const keys = checks.map((check) => this.keys.ratelimitWindow(workspaceId, check.limit, check.durationMs, check.bucket));
    // A limit known to be exhausted denies the call whatever the balance says, so the fast path holds with credits.
    const local = this.denyLocally(keys, checks, now);
    if (local) {
      this.stats.localDenials++;
      return Promise.resolve(local);
    }
    return new Promise((resolve, reject) => {
      const batchKey = now === undefined ? workspaceId : `${workspaceId}\u0000${now}`;
      let batch = this.batches.get(batchKey);
      if (!batch) {
        batch = { now, calls: [] };
        this.batches.set(batchKey, batch);
      }
      if (credit) keys.push(this.keys.keyCredits(workspaceId, credit.keyId));
      batch.calls.push({ keys, checks, credit, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Sends every waiting batch, split so that no execution carries more than MAX_KEYS_PER_EXECUTION keys. */
  private flush(): void {
    this.flushScheduled = false;
    const batches = [...this.batches.values()];
    this.batches.clear();
    for (const { now, calls } of batches) {
      let chunk: PendingCall[] = [];
      let keyCount = 0;
      for (const call of calls) {
        if (chunk.length > 0 && keyCount + call.keys.length > MAX_KEYS_PER_EXECUTION) {
          void this.execute(now, chunk);
          chunk = [];
          keyCount = 0;
        }
        chunk.push(call);
        keyCount += call.keys.length;
      }
      void this.execute(now, chunk);
    }
  }

  /** One script execution for `calls`; each call's promise settles with its own outcome (or the shared failure). */
  private async execute(now: number | undefined, calls: PendingCall[]): Promise<void> {
    // Each key goes out once, however many calls use it; the calls refer to it by its (1-based) position.
    const keys: string[] = [];
    const positions = new Map<string, string>();
    const position = (key: string): string => {
      let at = positions.get(key);
      if (at === undefined) {
        at = String(keys.push(key));
        positions.set(key, at);
      }
      return at;
    };
    const args: string[] = [now === undefined ? "" : String(now), String(calls.length)];
    for (const call of calls) {
      args.push(String(call.checks.length), call.credit ? "1" : "0");
      call.checks.forEach((check, index) => args.push(position(call.keys[index] as string), String(check.limit), String(check.durationMs), String(check.cost)));
      if (call.credit) args.push(position(call.keys[call.checks.length] as string), String(call.credit.cost));
    }
    const sentAt = this.clock.now();
    try {
      const reply = await this.guard.run(() => this.redis.keygateRatelimit(keys.length, ...keys, ...args));
      this.stats.scriptCalls++;
      this.stats.redisDecisions += calls.length;
      const decidedAt = reply[0] as number;
      if (now === undefined) this.redisClockOffsetMs = decidedAt - sentAt;
      let at = 1;
      for (const call of calls) {
        const passed = reply[at++] === 1;
        const results = call.checks.map((check, index): WindowResult => {
          const [checkPassed, remaining, sequence, current, previous] = reply.slice(at, at + RATELIMIT_REPLY_STRIDE) as [number, number, number, number, number];
          at += RATELIMIT_REPLY_STRIDE;
          const key = call.keys[index] as string;
          if (remaining === 0) this.known.set(key, { sequence, current, previous });
          else this.known.delete(key);
          return { passed: checkPassed === 1, remaining, resetAt: windowEnd(sequence, check.durationMs) };
        });
        if (!call.credit) {
          call.resolve({ passed, results, now: decidedAt });
          continue;
        }
        const creditPassed = reply[at++] === 1;
        const balance = reply[at++] as number;
        call.resolve({ passed, results, now: decidedAt, credit: { passed: creditPassed, remaining: balance === -1 ? null : balance } });
      }
    } catch (error) {
      // Calls already resolved ignore this; the others all fail the same way.
      for (const call of calls) call.reject(error);
    }
  }

  /** A denial Redis would certainly give, decided from what this instance knows; undefined when not certain. */
  private denyLocally(keys: string[], checks: readonly WindowCheck[], now: number | undefined): CounterOutcome | undefined {
    if (checks.length !== 1) return undefined;
    const check = checks[0] as WindowCheck;
    const at = now ?? (this.redisClockOffsetMs === undefined ? undefined : this.clock.now() + this.redisClockOffsetMs);
    if (at === undefined) return undefined;
    const sequence = windowSequence(at, check.durationMs);
    const deny = (): CounterOutcome => ({ passed: false, results: [{ passed: false, remaining: 0, resetAt: windowEnd(sequence, check.durationMs) }], now: at });
    if (check.limit === 0) return deny();
    if (check.cost === 0) return undefined;
    const known = this.known.get(keys[0] as string);
    if (!known || known.sequence < sequence - 1 || known.sequence > sequence) return undefined;
    return estimateUsed(at, sequence, check.durationMs, countsFor(known, sequence)) >= check.limit ? deny() : undefined;
  }
}
