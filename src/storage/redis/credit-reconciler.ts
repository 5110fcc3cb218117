import type { Clock } from "../../lib/clock.js";
import { isStoreUnavailable } from "../unavailable.js";
import { SETTLED_MARK } from "./credit-scripts.js";
import { isRedisUnavailable, type RedisGuard } from "./guard.js";
import type { RedisClient } from "./topology.js";

/** Where a store reports what it does on its own, in the background (pino's signature: details, then message). */
export interface StoreLog {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

export const SILENT_LOG: StoreLog = { info: () => {}, warn: () => {}, error: () => {} };

/** An execution of the rate limit script that may have spent credits, and whose answer keygate never got. */
export interface MissedExecution {
  /** Its receipt key (keys.creditReceipt), unique to it. */
  receiptKey: string;
  /** The balances it may have spent from: their 1-based positions in its KEYS, and their keys. */
  balances: readonly { position: number; key: string }[];
  /** Its time argument (unix ms, or "" for Redis's TIME), for refills given back with the credits. */
  now: string;
  /** When keygate stopped waiting for it (unix ms, this instance's clock). */
  missedAt: number;
}

export interface CreditReconcilerOptions {
  /** The raw connection (commands have its deadline); `guard` puts the breaker in front of it. */
  redis: RedisClient;
  guard: RedisGuard;
  clock: Clock;
  log: StoreLog;
  /** How long a receipt (and a cancellation) stays in Redis, ms: an execution settled later may have lost its receipt. */
  receiptTtlMs: number;
  /** Pause between attempts while Redis does not answer, ms (attempts also start when the breaker closes). */
  retryMs: number;
  /** Executions kept waiting at most; beyond, the oldest is given up (and logged). */
  maxPending: number;
}

/** What a reconciler has done so far (for tests and metrics). */
export interface ReconcilerTotals {
  /** Attempts at settling an execution, failed ones included. */
  attempts: number;
  /** Executions settled: found to have run (their credits given back) or cancelled before they ran. */
  settled: number;
  /** Of those, executions that had not run. */
  cancelled: number;
  creditsGivenBack: number;
  /** Executions given up: beyond maxPending, or still waiting when the store closed. */
  givenUp: number;
}

/** Settled together at most, per round (one command each, sent at once). */
const SETTLE_AT_ONCE = 100;

/**
 * Settles rate limit script executions that may have spent credits but whose answers never arrived in time (a
 * frozen or cut-off Redis), so that a credit stays spent only for a request answered as allowed from that very
 * decision: each is reconciled with lua/reconcile-credits.lua once Redis answers again, which gives back what the
 * execution took when it ran, and otherwise makes sure it never spends anything, in whichever order Redis runs the
 * two. Attempts repeat every `retryMs`, and at once when the breaker closes, until each is settled; at most
 * `maxPending` wait (the oldest is given up beyond). close() makes a last attempt.
 */
export class CreditReconciler {
  readonly totals: ReconcilerTotals = { attempts: 0, settled: 0, cancelled: 0, creditsGivenBack: 0, givenUp: 0 };
  private readonly options: CreditReconcilerOptions;
  /** By receipt key, oldest first. */
  private readonly pending = new Map<string, MissedExecution>();
  /** Receipt keys whose settling failed for a reason other than Redis not answering (logged once each). */
  private readonly failedOddly = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> | undefined;
  private closed = false;

  constructor(options: CreditReconcilerOptions) {
    this.options = options;
    options.guard.breaker.onStateChange((state) => {
      if (state === "closed") this.schedule(0);
    });
  }

  /** Executions waiting to be settled. */
  get size(): number {
    return this.pending.size;
  }

  /** Remembers an execution to settle; the first attempt waits `retryMs`, or for the breaker to close. */
  add(missed: MissedExecution): void {
    if (this.closed) {
      this.options.log.error(
        { receiptKey: missed.receiptKey },
        "a script execution that may have spent credits was missed while the store closed: credits it took, if it ran, stay spent",
      );
      return;
    }
    if (this.pending.size >= this.options.maxPending) {
      const [oldestKey, oldest] = this.pending.entries().next().value as [string, MissedExecution];
      this.pending.delete(oldestKey);
      this.failedOddly.delete(oldestKey);
      this.totals.givenUp++;
      this.options.log.error(
        { receiptKey: oldestKey, missedAt: new Date(oldest.missedAt).toISOString(), maxPending: this.options.maxPending },
        "too many missed script executions wait to be reconciled: the oldest is given up, and credits it took, if it ran, stay spent",
      );
    }
    if (this.pending.size === 0) {
      this.options.log.warn(
        { receiptKey: missed.receiptKey },
        "a call that may spend credits got no answer from Redis in time: it is reconciled once Redis answers",
      );
    }
    this.pending.set(missed.receiptKey, missed);
    this.schedule(this.options.retryMs);
  }

  /** Stops retrying, after one last attempt (each bounded by the command deadline) at what still waits. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    await this.round;
    if (this.pending.size > 0) await this.settleAll(false);
    if (this.pending.size > 0) {
      this.totals.givenUp += this.pending.size;
      this.options.log.error(
        { receiptKeys: [...this.pending.keys()] },
        `${this.pending.size} missed script executions could not be reconciled before the store closed: credits they took, if they ran, stay spent`,
      );
    }
  }

  /** Starts a round in `ms` (or sooner when one is due sooner already); one round at a time. */
  private schedule(ms: number): void {
    if (this.closed || this.pending.size === 0) return;
    if (this.round) return; // the round in progress schedules the next one
    if (this.timer && ms > 0) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.round = this.settleAll(true).finally(() => {
        this.round = undefined;
        if (this.pending.size > 0) this.schedule(this.options.retryMs);
        else this.options.log.info({}, "every missed call that may have spent credits is reconciled");
      });
    }, ms);
    this.timer.unref();
  }

  /** One attempt at every waiting execution; through the breaker unless `guarded` is false. */
  private async settleAll(guarded: boolean): Promise<void> {
    const waiting = [...this.pending.values()];
    for (let at = 0; at < waiting.length; at += SETTLE_AT_ONCE) {
      await Promise.all(waiting.slice(at, at + SETTLE_AT_ONCE).map((missed) => this.settle(missed, guarded)));
    }
  }

  private async settle(missed: MissedExecution, guarded: boolean): Promise<void> {
    const { redis, guard, log, clock, receiptTtlMs } = this.options;
    const send = () =>
      redis.keygateReconcileCredits(
        1 + missed.balances.length,
        missed.receiptKey,
        ...missed.balances.map((balance) => balance.key),
        missed.balances.map((balance) => balance.position).join(","),
        String(receiptTtlMs),
        missed.now,
      );
    let outcome: string;
    this.totals.attempts++;
    try {
      outcome = guarded ? await guard.run("credit_reconcile", send) : await send();
    } catch (error) {
      if (!this.failedOddly.has(missed.receiptKey) && !isStoreUnavailable(error) && !isRedisUnavailable(error)) {
        this.failedOddly.add(missed.receiptKey);
        log.error({ err: error, receiptKey: missed.receiptKey }, "reconciling a missed script execution failed; it is tried again");
      }
      return;
    }
    this.pending.delete(missed.receiptKey);
    this.failedOddly.delete(missed.receiptKey);
    this.totals.settled++;
    // The answer is the receipt key's settled mark, also when an earlier attempt settled it and its answer was lost.
    if (outcome === SETTLED_MARK) {
      this.totals.cancelled++;
      if (clock.now() - missed.missedAt >= receiptTtlMs) {
        log.error(
          { receiptKey: missed.receiptKey },
          "a missed script execution was reconciled after its receipt could have expired: credits it took, if it ran, stay spent",
        );
      } else log.info({ receiptKey: missed.receiptKey }, "a missed script execution had not run: it will spend nothing");
    } else {
      const credits = Number(outcome.slice(SETTLED_MARK.length));
      this.totals.creditsGivenBack += credits;
      log.warn(
        { receiptKey: missed.receiptKey, credits },
        "gave back the credits a script execution took after keygate stopped waiting for its answer",
      );
    }
  }
}
