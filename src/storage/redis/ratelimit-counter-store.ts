import { randomBytes } from "node:crypto";
import { LRUCache } from "lru-cache";
import type { Clock } from "../../lib/clock.js";
import { countsFor, estimateUsed, type StoredWindow, windowEnd, windowSequence } from "../../lib/sliding-window.js";
import type { CounterOutcome, CreditCheck, RatelimitCounterStore, WindowCheck, WindowResult } from "../interfaces.js";
import { StoreUnavailableError } from "../unavailable.js";
import { CreditReconciler, type ReconcilerTotals, SILENT_LOG, type StoreLog } from "./credit-reconciler.js";
import { neverSent, type RedisGuard } from "./guard.js";
import type { RedisKeys } from "./keys.js";
import { CANCELLED_REPLY, defineRatelimitCommand, parseRatelimitReply } from "./ratelimit-script.js";
import type { RedisClient } from "./topology.js";

/** Exhausted windows this instance remembers for its fast path (least recently used are forgotten first). */
const KNOWN_WINDOWS_MAX = 100_000;

/** Key uses (checks and balances) one script execution may carry at most; a bigger batch is split, so no execution
 * holds Redis for long. */
const MAX_KEYS_PER_EXECUTION = 1_000;

/** Limits below this are always decided on Redis: a reserved unit would be too large a share of them. */
export const MIN_LIMIT_TO_RESERVE = 1_000;

/** Units an instance reserves at a time: 1% of the limit, and never more than this. */
export const MAX_RESERVATION = 64;

/**
 * How long Redis keeps the receipt of an execution that took credits, and the mark that cancels one that never
 * ran: an execution whose answer was missed is settled only if Redis answers again within this time.
 */
export const RECEIPT_TTL_MS = 5 * 60_000;
const RECEIPT_TTL_ARGUMENT = String(RECEIPT_TTL_MS);

export interface RedisCounterStoreOptions {
  /** ratelimit.reservations. */
  reservations: boolean;
  /** Where reconciliation of missed executions is reported. */
  log?: StoreLog;
  /** Pause between attempts at reconciling while Redis does not answer, ms (default 1 s). */
  reconcileRetryMs?: number;
  /** Missed executions kept waiting to be reconciled at most (default 10,000). */
  maxPendingReconciliations?: number;
}

/** The units a call may ask to reserve (0: none): only lone checks without credits, of limits large enough. */
export function reservationFor(checks: readonly WindowCheck[], credit: CreditCheck | undefined): number {
  if (credit || checks.length !== 1) return 0;
  const check = checks[0] as WindowCheck;
  if (check.limit < MIN_LIMIT_TO_RESERVE || check.cost < 1) return 0;
  return Math.min(MAX_RESERVATION, Math.floor(check.limit / 100));
}

export interface CounterStoreStats {
  /** Script executions (round trips to Redis); one may carry several calls. */
  scriptCalls: number;
  /** Calls decided by Redis. */
  redisDecisions: number;
  /** Calls denied without asking Redis (the window was known to be exhausted, or the limit is 0). */
  localDenials: number;
  /** Calls admitted without asking Redis, from units reserved in it before. */
  localAdmissions: number;
}

/** Units of one counter's window that Redis counted for this instance and that it has not admitted yet. */
interface Reservation {
  sequence: number;
  units: number;
  /** What Redis had left besides these units when it last answered for this counter. */
  remaining: number;
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
  workspaceId: string;
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
 * Redis would also give.
 *
 * Reservations, within a stated budget: a lone check (no credit) of a limit of at least MIN_LIMIT_TO_RESERVE that
 * Redis admits also takes up to 1% of the limit (MAX_RESERVATION at most) for this instance, if the counter was in
 * use already (a counter called once, as with a new identifier per request, would leave units nobody admits and
 * an entry to track) and as long as the window stays at most half used. The next calls on that counter in the
 * same window are admitted here from those units, without a round trip, until they are used up. Units are counted
 * in Redis before they are handed out, so no instance ever admits more than the limit. The price: units one
 * instance holds are not available to the others, and units left when the window ends stay counted in it, so
 * keygate may deny up to one reservation (plus one call's cost) per instance per window that an exact count would
 * admit; near the limit (past half) every call is decided on Redis. `remaining` answered from a reservation is
 * what Redis last said plus the units still held.
 *
 * Everything else, and every call that may pass without a reservation, goes to Redis.
 *
 * Credits are spent only for calls whose answer arrived: an execution that may spend credits carries a receipt
 * key of its own (see ratelimit-script.ts). When its answer does not arrive (the deadline passed, the connection
 * dropped) its calls fail with StoreUnavailableError and get the fail mode's answer, none of them VALID from this
 * execution, yet Redis may have run it, or may still run it later. The CreditReconciler settles it once Redis
 * answers: it gives back what the receipt says was taken, or makes sure the execution never takes anything.
 * Calls the breaker refused were never sent and need nothing.
 */
export class RedisRatelimitCounterStore implements RatelimitCounterStore {
  readonly stats: CounterStoreStats = { scriptCalls: 0, redisDecisions: 0, localDenials: 0, localAdmissions: 0 };
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;
  private readonly guard: RedisGuard;
  private readonly clock: Clock;
  private readonly known = new LRUCache<string, StoredWindow>({ max: KNOWN_WINDOWS_MAX });
  private readonly reservations = new LRUCache<string, Reservation>({ max: KNOWN_WINDOWS_MAX });
  /** Counters with a reservation asked for in an execution not answered yet: one at a time per counter. */
  private readonly reserving = new Set<string>();
  /** ratelimit.reservations. */
  private readonly reserve: boolean;
  private readonly batches = new Map<string, Batch>();
  private flushScheduled = false;
  /** Redis time minus local time, measured at the last reply decided on Redis time; undefined before the first. */
  private redisClockOffsetMs: number | undefined;
  private readonly reconciler: CreditReconciler;
  /** Names this store's executions apart from every other instance's (with a count, in their receipt keys). */
  private readonly instanceId = randomBytes(6).toString("base64url");
  private executions = 0;

  constructor(
    redis: RedisClient,
    keys: RedisKeys,
    guard: RedisGuard,
    clock: Clock,
    options: RedisCounterStoreOptions = { reservations: true },
  ) {
    this.redis = redis;
    this.keys = keys;
    this.guard = guard;
    this.clock = clock;
    this.reserve = options.reservations;
    this.reconciler = new CreditReconciler({
      redis,
      guard,
      clock,
      log: options.log ?? SILENT_LOG,
      receiptTtlMs: RECEIPT_TTL_MS,
      retryMs: options.reconcileRetryMs ?? 1_000,
      maxPending: options.maxPendingReconciliations ?? 10_000,
    });
    defineRatelimitCommand(redis);
    // Counts seen before an outage may be gone if Redis restarted without its data; they are no lower bounds then.
    // Reserved units may be gone from it too: handing them out then could pass the limit.
    guard.breaker.onStateChange((state) => {
      if (state !== "closed") return;
      this.known.clear();
      this.reservations.clear();
    });
  }

  applyChecks(workspaceId: string, checks: readonly WindowCheck[], now?: number, credit?: CreditCheck): Promise<CounterOutcome> {
    const keys = checks.map((check) => this.keys.ratelimitWindow(workspaceId, check.limit, check.durationMs, check.bucket));
    // Units this instance holds were counted in Redis already: handing them out needs no round trip.
    const reserved = this.admitLocally(keys, checks, now, credit);
    if (reserved) {
      this.stats.localAdmissions++;
      return Promise.resolve(reserved);
    }
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
        batch = { workspaceId, now, calls: [] };
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
    for (const { workspaceId, now, calls } of batches) {
      let chunk: PendingCall[] = [];
      let keyCount = 0;
      for (const call of calls) {
        if (chunk.length > 0 && keyCount + call.keys.length > MAX_KEYS_PER_EXECUTION) {
          void this.execute(workspaceId, now, chunk);
          chunk = [];
          keyCount = 0;
        }
        chunk.push(call);
        keyCount += call.keys.length;
      }
      void this.execute(workspaceId, now, chunk);
    }
  }

  /** Missed executions waiting to be reconciled (see CreditReconciler). */
  get pendingReconciliations(): number {
    return this.reconciler.size;
  }

  /** What reconciling missed executions has done so far. */
  get reconciliation(): Readonly<ReconcilerTotals> {
    return this.reconciler.totals;
  }

  /** Makes a last attempt at reconciling missed executions, and stops retrying. Idempotent. */
  close(): Promise<void> {
    return this.reconciler.close();
  }

  /** One script execution for `calls`; each call's promise settles with its own outcome (or the shared failure). */
  private async execute(workspaceId: string, now: number | undefined, calls: PendingCall[]): Promise<void> {
    // Each key goes out once, with its limit and duration, however many calls use it; the calls refer to it by its
    // (1-based) position. On a hot key this is most of what a call would otherwise send.
    const keys: string[] = [];
    const limitsOfKeys: number[] = [];
    const positions = new Map<string, number>();
    const position = (key: string, limit: number, durationMs: number): number => {
      let at = positions.get(key);
      if (at === undefined) {
        at = keys.push(key);
        limitsOfKeys.push(limit, durationMs);
        positions.set(key, at);
      }
      return at;
    };
    const callArgs: number[] = [];
    /** Per call, the units its first check asked to reserve (the reply holds what was reserved only then). */
    const reserves: number[] = [];
    let reservedBy: Set<string> | undefined;
    /** Whether a call of this execution may spend credits. */
    let spends = false;
    for (const call of calls) {
      callArgs.push(call.checks.length * 2 + (call.credit ? 1 : 0));
      // One reservation asked for at a time per counter: calls made while it is on its way go without.
      let reserve = this.reserve ? reservationFor(call.checks, call.credit) : 0;
      const first = call.keys[0] as string;
      if (reserve > 0 && this.reserving.has(first)) reserve = 0;
      if (reserve > 0) {
        this.reserving.add(first);
        reservedBy ??= new Set();
        reservedBy.add(first);
      }
      reserves.push(reserve);
      for (const [index, check] of call.checks.entries()) {
        callArgs.push(position(call.keys[index] as string, check.limit, check.durationMs), check.cost, index === 0 ? reserve : 0);
      }
      if (call.credit) {
        callArgs.push(position(call.keys[call.checks.length] as string, 0, 0), call.credit.cost);
        if (call.credit.cost > 0) spends = true;
      }
    }
    // An execution that may spend credits gets a receipt key, last in KEYS (see ratelimit-script.ts).
    const receiptKey = spends ? this.keys.creditReceipt(workspaceId, `${this.instanceId}.${(this.executions++).toString(36)}`) : undefined;
    if (receiptKey) keys.push(receiptKey);
    const time = now === undefined ? "" : String(now);
    const numbers = [...limitsOfKeys, ...callArgs].join(",");
    const sentAt = this.clock.now();
    try {
      let answer: string;
      try {
        answer = await this.guard.run(() =>
          receiptKey
            ? this.redis.keygateRatelimit(keys.length, ...keys, time, String(calls.length), numbers, RECEIPT_TTL_ARGUMENT)
            : this.redis.keygateRatelimit(keys.length, ...keys, time, String(calls.length), numbers),
        );
        // Redis ran this execution before (ioredis sent it again after a reconnect), and that answer was lost.
        if (answer === CANCELLED_REPLY) throw new StoreUnavailableError(new Error("the answer of this rate limit call was lost"));
      } catch (error) {
        // None of these calls is answered from this execution: if it ran or runs, what it took is given back.
        if (receiptKey && !neverSent(error))
          this.reconciler.add({ receiptKey, balances: balancesSpentFrom(calls, positions), now: time, missedAt: this.clock.now() });
        throw error;
      }
      const reply = parseRatelimitReply(answer);
      this.stats.scriptCalls++;
      this.stats.redisDecisions += calls.length;
      const decidedAt = reply[0] as number;
      if (now === undefined) this.redisClockOffsetMs = decidedAt - sentAt;
      let at = 1;
      calls.forEach((call, callIndex) => {
        let passed = true;
        const results = call.checks.map((check, index): WindowResult => {
          const checkPassed = reply[at++] === 1;
          const remaining = reply[at++] as number;
          const sequence = reply[at++] as number;
          const reserved = index === 0 && (reserves[callIndex] as number) > 0 ? (reply[at++] as number) : 0;
          const key = call.keys[index] as string;
          if (remaining === 0) this.known.set(key, { sequence, current: reply[at++] as number, previous: reply[at++] as number });
          else this.known.delete(key);
          passed &&= checkPassed;
          const held = this.holdReservation(key, sequence, remaining, reserved);
          return { passed: checkPassed, remaining: remaining + held, resetAt: windowEnd(sequence, check.durationMs) };
        });
        if (!call.credit) {
          call.resolve({ passed, results, now: decidedAt });
          return;
        }
        const creditPassed = reply[at++] === 1;
        const balance = reply[at++] as number;
        call.resolve({
          passed: passed && creditPassed,
          results,
          now: decidedAt,
          credit: { passed: creditPassed, remaining: balance === -1 ? null : balance },
        });
      });
    } catch (error) {
      // Calls already resolved ignore this; the others all fail the same way.
      for (const call of calls) call.reject(error);
    } finally {
      for (const key of reservedBy ?? []) this.reserving.delete(key);
    }
  }

  /**
   * Records what Redis answered for a counter: the units it reserved for this instance (added to those still held
   * for the same window; held units of an earlier window are dropped) and what it has left besides. Returns the
   * units this instance now holds for the counter.
   */
  private holdReservation(key: string, sequence: number, remaining: number, reserved: number): number {
    let reservation = this.reservations.get(key);
    if (reservation && reservation.sequence !== sequence) {
      this.reservations.delete(key);
      reservation = undefined;
    }
    if (reserved > 0) {
      reservation = { sequence, units: (reservation?.units ?? 0) + reserved, remaining };
      this.reservations.set(key, reservation);
    } else if (reservation) {
      reservation.remaining = remaining;
    }
    return reservation?.units ?? 0;
  }

  /** A call admitted from the units this instance holds in its counter's current window; undefined when it cannot be. */
  private admitLocally(
    keys: string[],
    checks: readonly WindowCheck[],
    now: number | undefined,
    credit: CreditCheck | undefined,
  ): CounterOutcome | undefined {
    if (!this.reserve || reservationFor(checks, credit) === 0) return undefined;
    const key = keys[0] as string;
    const reservation = this.reservations.get(key);
    const check = checks[0] as WindowCheck;
    if (!reservation || reservation.units < check.cost) return undefined;
    // This estimate of Redis's time errs towards the future: a window it still places the call in has not ended.
    const at = this.decisionTime(now);
    if (at === undefined || windowSequence(at, check.durationMs) !== reservation.sequence) return undefined;
    reservation.units -= check.cost;
    return {
      passed: true,
      results: [
        { passed: true, remaining: reservation.remaining + reservation.units, resetAt: windowEnd(reservation.sequence, check.durationMs) },
      ],
      now: at,
    };
  }

  /**
   * The time a call is decided at: the caller's `now`, or else Redis's time estimated from the offset measured at
   * the last reply (undefined before the first one).
   */
  private decisionTime(now: number | undefined): number | undefined {
    return now ?? (this.redisClockOffsetMs === undefined ? undefined : this.clock.now() + this.redisClockOffsetMs);
  }

  /** A denial Redis would certainly give, decided from what this instance knows; undefined when not certain. */
  private denyLocally(keys: string[], checks: readonly WindowCheck[], now: number | undefined): CounterOutcome | undefined {
    if (checks.length !== 1) return undefined;
    const check = checks[0] as WindowCheck;
    const at = this.decisionTime(now);
    if (at === undefined) return undefined;
    const sequence = windowSequence(at, check.durationMs);
    const deny = (): CounterOutcome => ({
      passed: false,
      results: [{ passed: false, remaining: 0, resetAt: windowEnd(sequence, check.durationMs) }],
      now: at,
    });
    if (check.limit === 0) return deny();
    if (check.cost === 0) return undefined;
    const known = this.known.get(keys[0] as string);
    if (!known || known.sequence < sequence - 1 || known.sequence > sequence) return undefined;
    return estimateUsed(at, sequence, check.durationMs, countsFor(known, sequence)) >= check.limit ? deny() : undefined;
  }
}

/** The balances the calls of an execution may spend from (cost above 0), each once, with their positions in its KEYS. */
function balancesSpentFrom(calls: readonly PendingCall[], positions: ReadonlyMap<string, number>): { position: number; key: string }[] {
  const balances = new Map<string, number>();
  for (const call of calls) {
    if (!call.credit || call.credit.cost === 0) continue;
    const key = call.keys[call.checks.length] as string;
    balances.set(key, positions.get(key) as number);
  }
  return [...balances].map(([key, position]) => ({ position, key }));
}
