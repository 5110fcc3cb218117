import { KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { windowEnd, windowSequence } from "../../lib/sliding-window.js";
import type { CounterOutcome, CreditCheck, RatelimitCounterStore, WindowCheck } from "../../storage/counter-interfaces.js";
import { isStoreUnavailable, type StoreUnavailableError } from "../../storage/unavailable.js";
import { type Observer, type RatelimitDecider, type RatelimitSource, UNOBSERVED } from "../observer.js";

/** What rate limit checks answer while the counter store cannot: refuse (closed), allow (open), or count locally. */
export const RATELIMIT_FAIL_MODES = ["closed", "open", "local"] as const;
export type RatelimitFailMode = (typeof RATELIMIT_FAIL_MODES)[number];

export interface LimiterOutcome extends CounterOutcome {
  /**
   * Set when the shared counters could not be reached and the answer follows `ratelimit.fail`: "open" (allowed
   * without counting) or "local" (decided on this instance's own counters). Absent for exact answers.
   */
  degraded?: "open" | "local";
}

export interface LimiterOptions {
  /** The counters every instance shares (Redis), or the only ones (memory). */
  counters: RatelimitCounterStore;
  /** This instance's own counters, used while `counters` is unavailable in fail mode `local`. */
  localCounters: RatelimitCounterStore;
  failMode: RatelimitFailMode;
  clock: Clock;
  /**
   * true: windows follow `clock` (tests inject one). false: the shared store decides on its own clock (Redis
   * TIME), so instances whose clocks disagree still agree on every window.
   */
  windowsFollowClock: boolean;
  /** Which kind of store `counters` is, as decisions are reported to `observer`. */
  shared?: "redis" | "memory";
  observer?: Observer;
}

/** What a limiter call is about besides its checks. */
export interface LimiterCall {
  /** Who asks, as decisions are reported. */
  source: RatelimitSource;
  /** Joins the same all-or-nothing step (verification's credits). */
  credit?: CreditCheck | undefined;
}

/**
 * Checks several sliding-window limits and consumes them all-or-nothing, for every kind of limit keygate has:
 * namespace limits (ratelimit.limit, the gateway) and, through their own buckets, key and identity limits. When the
 * shared counters are unavailable, `failMode` decides: closed → a 503 that says so, open → allow, local → this
 * instance's counters. A limit of 0 never passes, in any mode: that needs no counter.
 */
export class Limiter {
  private readonly options: LimiterOptions;

  constructor(options: LimiterOptions) {
    this.options = options;
  }

  /**
   * A credit check joins the same step. Balances are shared by every instance, so no instance can decide them
   * alone: while the counters are unavailable, a credit check is let through without taking anything in mode
   * `open`, and refused (503) in `closed` and `local`.
   */
  async checkAndConsume(workspaceId: string, checks: readonly WindowCheck[], call: LimiterCall): Promise<LimiterOutcome> {
    const now = this.options.windowsFollowClock ? this.options.clock.now() : undefined;
    let outcome: LimiterOutcome;
    try {
      outcome = await this.options.counters.applyChecks(workspaceId, checks, now, call.credit);
    } catch (error) {
      if (!isStoreUnavailable(error)) throw error;
      const failMode = this.options.failMode;
      try {
        outcome = await this.fallBack(workspaceId, checks, call.credit, error);
      } catch (refusal) {
        this.report(call.source, false, failMode === "local" ? "fail_local" : "fail_closed");
        throw refusal;
      }
    }
    this.report(call.source, outcome.passed, deciderOf(outcome, this.options.shared ?? "memory"));
    return outcome;
  }

  private report(source: RatelimitSource, allowed: boolean, decider: RatelimitDecider): void {
    (this.options.observer ?? UNOBSERVED).ratelimitDecided(source, allowed, decider);
  }

  private async fallBack(
    workspaceId: string,
    checks: readonly WindowCheck[],
    credit: CreditCheck | undefined,
    error: StoreUnavailableError,
  ): Promise<LimiterOutcome> {
    const now = this.options.clock.now();
    const retryAfterSeconds = Math.max(1, Math.ceil((error.retryAfterMs ?? 0) / 1_000));
    if (credit && credit.cost > 0 && this.options.failMode !== "open") {
      throw new KeygateError(
        "err:unkey:data:credits_unavailable",
        `Credits cannot be checked right now: balances are kept in Redis, which does not answer, and this keygate refuses requests that spend credits then (ratelimit.fail: ${this.options.failMode}). Try again shortly.`,
        { cause: error, headers: { "retry-after": String(retryAfterSeconds) } },
      );
    }
    switch (this.options.failMode) {
      case "closed": {
        throw new KeygateError(
          "err:unkey:data:ratelimit_unavailable",
          "Rate limits cannot be checked right now: their counters in Redis do not answer, and this keygate is configured to refuse requests then (ratelimit.fail: closed). Try again shortly.",
          { cause: error, headers: { "retry-after": String(retryAfterSeconds) } },
        );
      }
      case "open": {
        const results = checks.map((check) => ({
          // Nothing is counted; only what is certain without counters still denies.
          passed: check.limit > 0 && check.cost <= check.limit,
          remaining: Math.max(0, check.limit - check.cost),
          resetAt: windowEnd(windowSequence(now, check.durationMs), check.durationMs),
        }));
        return degraded({ passed: results.every((result) => result.passed), results, now }, credit, "open");
      }
      case "local":
        return degraded(await this.options.localCounters.applyChecks(workspaceId, checks, now), credit, "local");
    }
  }
}

/**
 * A degraded answer: the outcome the fallback gave, its credit check (when the call had one) passed as unlimited,
 * since no balance can be read. Written out rather than spread from `outcome`: while the shared counters are down
 * this answers every call (docs/architecture.md#conventions).
 */
function degraded(outcome: CounterOutcome, credit: CreditCheck | undefined, mode: "open" | "local"): LimiterOutcome {
  const answer: LimiterOutcome = { passed: outcome.passed, results: outcome.results, now: outcome.now, degraded: mode };
  if (credit) answer.credit = { passed: true, remaining: null };
  else if (outcome.credit !== undefined) answer.credit = outcome.credit;
  if (outcome.decidedLocally !== undefined) answer.decidedLocally = outcome.decidedLocally;
  return answer;
}

function deciderOf(outcome: LimiterOutcome, shared: "redis" | "memory"): RatelimitDecider {
  if (outcome.degraded === "open") return "fail_open";
  if (outcome.degraded === "local") return "fail_local";
  return outcome.decidedLocally ? "local" : shared;
}
