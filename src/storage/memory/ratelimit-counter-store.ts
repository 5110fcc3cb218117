import type { Clock } from "../../lib/clock.js";
import { withRefills } from "../../lib/credit-refill.js";
import { defined } from "../../lib/defined.js";
import { alignToStored, countsFor, estimateUsed, type StoredWindow, windowEnd } from "../../lib/sliding-window.js";
import type {
  CallDecision,
  CounterCall,
  CounterOutcome,
  CreditCheck,
  CreditOutcome,
  DecidedWindow,
  RatelimitBatchStore,
  RatelimitCounterStore,
  WindowCheck,
  WindowResult,
} from "../counter-interfaces.js";
import type { CreditRecord } from "../records.js";

/** Balances of one kind held in the same process (the in-memory key and identity stores), by owner id. */
export interface BalanceHolder {
  readBalance(workspaceId: string, id: string): CreditRecord | null;
  writeBalance(workspaceId: string, id: string, balance: CreditRecord): void;
}

/** Credit balances held in the same process, read and written without awaiting: the one a credit check spends. */
export interface CreditLedger {
  readBalance(workspaceId: string, credit: CreditCheck): CreditRecord | null;
  writeBalance(workspaceId: string, credit: CreditCheck, balance: CreditRecord): void;
}

/** The ledger of keys' and identities' balances: a check with an identityId spends the identity's. */
export function creditLedger(keys: BalanceHolder, identities: BalanceHolder): CreditLedger {
  return {
    readBalance: (workspaceId, credit) =>
      credit.identityId === undefined
        ? keys.readBalance(workspaceId, credit.keyId)
        : identities.readBalance(workspaceId, credit.identityId),
    writeBalance: (workspaceId, credit, balance) => {
      if (credit.identityId === undefined) keys.writeBalance(workspaceId, credit.keyId, balance);
      else identities.writeBalance(workspaceId, credit.identityId, balance);
    },
  };
}

/** Entries whose windows have both ended are dropped at most this often (a sweep is linear in the entries). */
const SWEEP_INTERVAL_MS = 60_000;

/** A counter as one call sees it: its window, the estimate before the call, and what the call's checks took. */
interface Counter {
  stored: StoredWindow;
  base: number;
  taken: number;
  durationMs: number;
}

/** Phase 1 of a call: per distinct counter where it stands, per check whether it passes on its own. */
interface Evaluation {
  counters: Map<string, Counter>;
  evaluated: { key: string; before: number; passed: boolean }[];
  passed: boolean;
}

interface Entry extends StoredWindow {
  /** When this entry stops mattering: the end of the window after the stored one. */
  expiresAt: number;
}

/**
 * Counters in process memory: the store of a keygate without Redis, and the rate limiter's `local` fallback
 * while Redis is unavailable. A call runs without awaiting anything, so it is atomic in Node's single thread.
 * The arithmetic is the Lua script's (storage/redis/lua/ratelimit.lua), written with lib/sliding-window.ts.
 */
export class MemoryRatelimitCounterStore implements RatelimitCounterStore, RatelimitBatchStore {
  private readonly windows = new Map<string, Entry>();
  private readonly clock: Clock;
  /** Where credit checks read and take balances; absent for the rate limiter's local fallback, which has none. */
  private readonly ledger: CreditLedger | undefined;
  private lastSweep = Number.NEGATIVE_INFINITY;

  constructor(clock: Clock, ledger?: CreditLedger) {
    this.clock = clock;
    this.ledger = ledger;
  }

  async applyChecks(
    workspaceId: string,
    checks: readonly WindowCheck[],
    now: number = this.clock.now(),
    credit?: CreditCheck,
  ): Promise<CounterOutcome> {
    return this.decide(workspaceId, { checks, credit }, now).outcome;
  }

  async applyBatch(workspaceId: string, calls: readonly CounterCall[], now: number = this.clock.now()): Promise<CallDecision[]> {
    return calls.map((call) => this.decide(workspaceId, call, now));
  }

  private decide(workspaceId: string, { checks, credit, reserve }: CounterCall, now: number): CallDecision {
    this.sweep(now);
    const { counters, evaluated, passed: limitsPassed } = this.evaluate(workspaceId, checks, now);
    let passed = limitsPassed;

    // The balance, refilled as due, must cover the cost; it is taken only when every limit passes too.
    let balance: { stored: CreditRecord; refilled: CreditRecord } | undefined;
    if (credit) {
      if (!this.ledger) throw new Error("these counters hold no credit balances");
      const stored = this.ledger.readBalance(workspaceId, credit);
      if (stored) {
        balance = { stored, refilled: withRefills(stored, now) };
        if (credit.cost > 0 && balance.refilled.remaining < credit.cost) passed = false;
      }
    }

    const reserved = checks.map((check, index) =>
      passed && !credit ? this.reservable(check, evaluated[index]?.before ?? 0, reserve?.[index] ?? 0) : 0,
    );
    if (passed) {
      if (credit && balance && (credit.cost > 0 || balance.refilled !== balance.stored)) {
        (this.ledger as CreditLedger).writeBalance(workspaceId, credit, {
          ...balance.refilled,
          remaining: balance.refilled.remaining - credit.cost,
        });
      }
      for (const [index, units] of reserved.entries())
        if (units > 0) (counters.get(evaluated[index]?.key as string) as Counter).taken += units;
      for (const [key, counter] of counters) {
        if (counter.taken === 0) continue;
        const { sequence, current, previous } = counter.stored;
        this.windows.set(key, {
          sequence,
          current: current + counter.taken,
          previous,
          expiresAt: windowEnd(sequence + 1, counter.durationMs),
        });
      }
    }

    const windows: DecidedWindow[] = [];
    const results: WindowResult[] = checks.map((check, index) => {
      const { key, before, passed: checkPassed } = evaluated[index] as { key: string; before: number; passed: boolean };
      const counter = counters.get(key) as Counter;
      // A denied call consumed nothing, so every check reports the room its window had before the call.
      const used = passed ? before + check.cost + (reserved[index] as number) : counter.base;
      const remaining = Math.max(0, check.limit - used);
      const { sequence, current, previous } = counter.stored;
      const counts = remaining === 0 ? { current: passed ? current + counter.taken : current, previous } : undefined;
      windows.push({ sequence, reserved: reserved[index] as number, ...defined({ counts }) });
      return { passed: checkPassed, remaining, resetAt: windowEnd(sequence, check.durationMs) };
    });
    if (!credit) return { outcome: { passed, results, now }, windows };
    const creditOutcome: CreditOutcome = balance
      ? {
          passed: credit.cost === 0 || balance.refilled.remaining >= credit.cost,
          remaining: passed ? balance.refilled.remaining - credit.cost : balance.refilled.remaining,
        }
      : { passed: true, remaining: null };
    return { outcome: { passed, results, now, credit: creditOutcome }, windows };
  }

  /** Decides each check on its counter's usage, with what the call's earlier checks took from the same counter. */
  private evaluate(workspaceId: string, checks: readonly WindowCheck[], now: number): Evaluation {
    // Per distinct counter: where its window stands and what earlier checks of this call took from it.
    const counters = new Map<string, Counter>();
    const evaluated: { key: string; before: number; passed: boolean }[] = [];
    let passed = true;
    for (const check of checks) {
      const key = `${workspaceId}\u0000${check.limit}\u0000${check.durationMs}\u0000${check.bucket}`;
      let counter = counters.get(key);
      if (!counter) {
        const existing = this.windows.get(key);
        const { sequence, at } = alignToStored(now, check.durationMs, existing);
        const counts = countsFor(existing, sequence);
        counter = {
          stored: { sequence, ...counts },
          base: estimateUsed(at, sequence, check.durationMs, counts),
          taken: 0,
          durationMs: check.durationMs,
        };
        counters.set(key, counter);
      }
      const before = counter.base + counter.taken;
      const ok = check.limit > 0 && before + check.cost <= check.limit;
      if (ok) counter.taken += check.cost;
      else passed = false;
      evaluated.push({ key, before, passed: ok });
    }

    return { counters, evaluated, passed };
  }

  /** The units a check of a passing call may reserve besides its cost (see CounterCall.reserve). */
  private reservable(check: WindowCheck, before: number, reserve: number): number {
    if (reserve <= 0 || before <= 0) return 0;
    return Math.max(0, Math.min(reserve, Math.floor(check.limit / 2) - (before + check.cost)));
  }

  /** Number of counters held (tests). */
  get size(): number {
    return this.windows.size;
  }

  private sweep(now: number): void {
    if (now - this.lastSweep < SWEEP_INTERVAL_MS) return;
    this.lastSweep = now;
    for (const [key, entry] of this.windows) if (entry.expiresAt <= now) this.windows.delete(key);
  }
}
