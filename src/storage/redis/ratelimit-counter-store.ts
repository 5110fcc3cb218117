import { randomBytes } from "node:crypto";
import type { Clock } from "../../lib/clock.js";
import { windowEnd } from "../../lib/sliding-window.js";
import type { CallDecision, CounterCall, DecidedWindow, RatelimitBatchStore, WindowResult } from "../counter-interfaces.js";
import { StoreUnavailableError } from "../unavailable.js";
import { CreditReconciler, type MissedExecution, type ReconcilerTotals, SILENT_LOG, type StoreLog } from "./credit-reconciler.js";
import { neverSent, type RedisGuard } from "./guard.js";
import type { RedisKeys } from "./keys.js";
import { CANCELLED_REPLY, defineRatelimitCommand, parseRatelimitReply } from "./ratelimit-script.js";
import type { RedisClient } from "./topology.js";

/** Key uses (checks and balances) one script execution may carry at most, so no execution holds Redis for long. */
export const MAX_KEYS_PER_EXECUTION = 1_000;

/**
 * How long Redis keeps the receipt of an execution that took credits, and the mark that cancels one that never
 * ran: an execution whose answer was missed is settled only if Redis answers again within this time.
 */
export const RECEIPT_TTL_MS = 5 * 60_000;
const RECEIPT_TTL_ARGUMENT = String(RECEIPT_TTL_MS);

export interface RedisCounterStoreOptions {
  /** Where reconciliation of missed executions is reported. */
  log?: StoreLog;
  /** Pause between attempts at reconciling while Redis does not answer, ms (default 1 s). */
  reconcileRetryMs?: number;
  /** Missed executions kept waiting to be reconciled at most (default 10,000). */
  maxPendingReconciliations?: number;
}

/** A batch as the script takes it (see lua/ratelimit.lua): keys, and the numbers that refer to them. */
interface EncodedBatch {
  keys: string[];
  numbers: string;
  /** The balances the batch may spend from (cost above 0), each once, with their positions. */
  spentFrom: MissedExecution["balances"];
}

/**
 * Counters in Redis: each batch is one execution of lua/ratelimit.lua, behind the connection's breaker.
 *
 * Credits are spent only for calls whose answer arrived. An execution that may spend credits carries a receipt
 * key of its own; when its answer does not arrive (deadline, dropped connection) its calls fail with
 * StoreUnavailableError, yet Redis may have run it or may still run it, so the CreditReconciler settles it once
 * Redis answers: it gives back what the receipt says was taken, or makes sure the execution never takes anything.
 */
export class RedisRatelimitCounterStore implements RatelimitBatchStore {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;
  private readonly guard: RedisGuard;
  private readonly clock: Clock;
  private readonly reconciler: CreditReconciler;
  /** Names this store's executions apart from every other instance's (with a count, in their receipt keys). */
  private readonly instanceId = randomBytes(6).toString("base64url");
  private executions = 0;

  constructor(redis: RedisClient, keys: RedisKeys, guard: RedisGuard, clock: Clock, options: RedisCounterStoreOptions = {}) {
    this.redis = redis;
    this.keys = keys;
    this.guard = guard;
    this.clock = clock;
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
  }

  async applyBatch(workspaceId: string, calls: readonly CounterCall[], now?: number): Promise<CallDecision[]> {
    const batch = this.encode(workspaceId, calls);
    const receiptKey =
      batch.spentFrom.length > 0
        ? this.keys.creditReceipt(workspaceId, `${this.instanceId}.${(this.executions++).toString(36)}`)
        : undefined;
    const time = now === undefined ? "" : String(now);
    const args = [time, String(calls.length), batch.numbers];
    if (receiptKey) args.push(RECEIPT_TTL_ARGUMENT);
    const keys = receiptKey ? [...batch.keys, receiptKey] : batch.keys;
    let answer: string;
    try {
      answer = await this.guard.run("ratelimit", () => this.redis.keygateRatelimit(keys.length, ...keys, ...args));
      // Redis ran this execution before (ioredis sent it again after a reconnect), and that answer was lost.
      if (answer === CANCELLED_REPLY) throw new StoreUnavailableError(new Error("the answer of this rate limit call was lost"));
    } catch (error) {
      // No call is answered from this execution: if it ran or runs, what it took is given back.
      if (receiptKey && !neverSent(error))
        this.reconciler.add({ receiptKey, balances: batch.spentFrom, now: time, missedAt: this.clock.now() });
      throw error;
    }
    return decodeReply(parseRatelimitReply(answer), calls);
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

  /**
   * Each key goes out once, with its limit and duration, however many calls use it; the calls refer to it by its
   * position. On a hot key this is most of what a call would otherwise send.
   */
  private encode(workspaceId: string, calls: readonly CounterCall[]): EncodedBatch {
    const keys: string[] = [];
    const limitsOfKeys: number[] = [];
    const known = new Map<string, number>();
    const position = (key: string, limit: number, durationMs: number): number => {
      let at = known.get(key);
      if (at === undefined) {
        at = keys.push(key);
        limitsOfKeys.push(limit, durationMs);
        known.set(key, at);
      }
      return at;
    };
    const callArgs: number[] = [];
    const spentFrom = new Map<string, number>();
    for (const { checks, credit, reserve } of calls) {
      callArgs.push(checks.length * 2 + (credit ? 1 : 0));
      for (const [index, check] of checks.entries()) {
        const key = this.keys.ratelimitWindow(workspaceId, check.limit, check.durationMs, check.bucket);
        callArgs.push(position(key, check.limit, check.durationMs), check.cost, reserve?.[index] ?? 0);
      }
      if (credit) {
        const key =
          credit.identityId === undefined
            ? this.keys.keyCredits(workspaceId, credit.keyId)
            : this.keys.identityCredits(workspaceId, credit.identityId);
        const at = position(key, 0, 0);
        callArgs.push(at, credit.cost);
        if (credit.cost > 0) spentFrom.set(key, at);
      }
    }
    return {
      keys,
      numbers: [...limitsOfKeys, ...callArgs].join(","),
      spentFrom: [...spentFrom].map(([key, at]) => ({ position: at, key })),
    };
  }
}

/** The script's reply, in the order lua/ratelimit.lua gives it, as one decision per call. */
function decodeReply(reply: readonly number[], calls: readonly CounterCall[]): CallDecision[] {
  const now = reply[0] as number;
  let at = 1;
  return calls.map(({ checks, credit, reserve }): CallDecision => {
    const windows: DecidedWindow[] = [];
    const results = checks.map((check, index): WindowResult => {
      const passed = reply[at++] === 1;
      const remaining = reply[at++] as number;
      const sequence = reply[at++] as number;
      const reserved = (reserve?.[index] ?? 0) > 0 ? (reply[at++] as number) : 0;
      if (remaining === 0)
        windows.push({ sequence, reserved, counts: { current: reply[at++] as number, previous: reply[at++] as number } });
      else windows.push({ sequence, reserved });
      return { passed, remaining, resetAt: windowEnd(sequence, check.durationMs) };
    });
    const passed = results.every((result) => result.passed);
    if (!credit) return { outcome: { passed, results, now }, windows };
    const creditPassed = reply[at++] === 1;
    const balance = reply[at++] as number;
    return {
      outcome: {
        passed: passed && creditPassed,
        results,
        now,
        credit: { passed: creditPassed, remaining: balance === -1 ? null : balance },
      },
      windows,
    };
  });
}
