import type { WindowCounts } from "../lib/sliding-window.js";

// The rate limit counters every instance shares: what a check is, what it answers, and the stores that decide them.

/** One sliding-window limit to check (lib/sliding-window.ts has the algorithm). */
export interface WindowCheck {
  /**
   * What is counted, unique within the workspace, e.g. `ns:<namespaceId>:<identifier>`. Checks of one bucket
   * with another limit or duration count separately, so a changed limit starts afresh.
   */
  bucket: string;
  /** Units admitted per sliding window; 0 blocks everything. */
  limit: number;
  durationMs: number;
  /** Units this request takes; 0 checks without consuming (denied only when the window is already over). */
  cost: number;
}

export interface WindowResult {
  /** This check on its own would pass (with the cost of earlier checks of the same bucket in this call). */
  passed: boolean;
  /** Units the window still admits after this call. A call that was denied consumed nothing, for any of its checks. */
  remaining: number;
  /** Unix ms at which the current fixed window ends. */
  resetAt: number;
}

/**
 * A credit deduction decided together with the limits of a call: the call passes only when the key's balance
 * (refilled as due) covers `cost`, and then both are consumed; otherwise neither is.
 */
export interface CreditCheck {
  keyId: string;
  /** Set when the key's identity pays: the identity's balance is checked and taken instead of the key's. */
  identityId?: string;
  /** Credits this request takes; 0 checks without taking any (and always passes). */
  cost: number;
}

export interface CreditOutcome {
  /** The balance covers the cost. */
  passed: boolean;
  /** The balance after the call (unchanged when the call was denied); null when the key has no balance (unlimited). */
  remaining: number | null;
}

export interface CounterOutcome {
  /** True when every check passed and each one's cost was consumed; false when none was consumed. */
  passed: boolean;
  /** One result per check, in order. */
  results: WindowResult[];
  /** The instant the decision was made at (unix ms): the `now` given, or the store's own clock. */
  now: number;
  /** The credit check's result, when the call had one (absent when a denial was certain without reading it). */
  credit?: CreditOutcome;
  /** Set when this instance answered from what it already knew, without asking the shared store. */
  decidedLocally?: true;
}

/**
 * Rate limit counters. Checking and consuming is one atomic step across every instance that shares the store:
 * the limits of a call are all-or-nothing, so a denial by one consumes none of the others.
 */
export interface RatelimitCounterStore {
  /**
   * Checks every limit and, only if all pass, consumes each one's cost. `now` (unix ms) is the time to decide
   * at (tests pass an injected clock's time); without it the store uses one clock that every instance shares
   * (Redis: the server's TIME). Throws StoreUnavailableError when the store cannot answer in time.
   */
  applyChecks(workspaceId: string, checks: readonly WindowCheck[], now?: number, credit?: CreditCheck): Promise<CounterOutcome>;
}

/** One call of a batch: its checks, an optional credit check, and units to reserve for the calling instance. */
export interface CounterCall {
  checks: readonly WindowCheck[];
  credit?: CreditCheck | undefined;
  /**
   * Units to take besides the cost on each check's counter, in the order of `checks`, for the caller to admit later
   * without asking (absent, or 0 for a check: none). Honoured only for a call without credit that passes, on each
   * counter already in use (counted above 0 before the call), and only as far as its window stays at most half
   * used. The checks of a call that asks are on distinct counters.
   */
  reserve?: readonly number[];
}

/** What a batch store knows of one check's counter after deciding it. */
export interface DecidedWindow {
  /** The fixed window the check was decided in. */
  sequence: number;
  /** Units reserved for the caller (not part of the result's `remaining`); 0 unless the call asked. */
  reserved: number;
  /** Only when nothing remains: the counts of that window and the one before, after the call. */
  counts?: WindowCounts;
}

export interface CallDecision {
  outcome: CounterOutcome;
  /** One per check, in order. */
  windows: DecidedWindow[];
}

/**
 * Counters that decide a batch of calls in one atomic step (Redis: one script execution). Calls are decided in
 * order, each on its own exactly as if it had been sent alone, all at one time: `now`, or the store's own clock.
 * The policies of storage/ratelimit/ (batching, reservations, local denials) build a RatelimitCounterStore on one.
 * Throws StoreUnavailableError when the store cannot answer in time: then no call of the batch has an answer.
 */
export interface RatelimitBatchStore {
  applyBatch(workspaceId: string, calls: readonly CounterCall[], now?: number): Promise<CallDecision[]>;
}
