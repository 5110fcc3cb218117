import { LRUCache } from "lru-cache";
import { countsFor, estimateUsed, type StoredWindow, windowEnd, windowSequence } from "../../lib/sliding-window.js";
import type { CounterOutcome, DecidedWindow, WindowCheck } from "../counter-interfaces.js";
import { counterId, REMEMBERED_COUNTERS_MAX } from "./counter-id.js";

/**
 * Denials the shared store would certainly give, decided here without asking it. Counts only grow within a
 * window and the sliding estimate only shrinks as time passes, so the counts last seen for a counter are lower
 * bounds of the true ones: when a lone check's window is over its limit even by those (at a time that errs
 * towards the future, see StoreClock), the store would deny it too, with remaining 0. Only windows seen exhausted
 * are remembered, since counts below the limit can never prove a later denial. A limit of 0 is always denied.
 */
export class ExhaustedWindows {
  private readonly known = new LRUCache<string, StoredWindow>({ max: REMEMBERED_COUNTERS_MAX });

  /** Records what the store answered for a check's counter. */
  observe(workspaceId: string, check: WindowCheck, window: DecidedWindow): void {
    const key = counterId(workspaceId, check);
    const counts = window.counts;
    if (counts) this.known.set(key, { sequence: window.sequence, current: counts.current, previous: counts.previous });
    else this.known.delete(key);
  }

  /** The store's certain denial of `checks` at `at`; undefined when not certain (or the time is not known). */
  denial(workspaceId: string, checks: readonly WindowCheck[], at: number | undefined): CounterOutcome | undefined {
    if (checks.length !== 1 || at === undefined) return undefined;
    const check = checks[0] as WindowCheck;
    const sequence = windowSequence(at, check.durationMs);
    const deny = (): CounterOutcome => ({
      passed: false,
      results: [{ passed: false, remaining: 0, resetAt: windowEnd(sequence, check.durationMs) }],
      now: at,
    });
    if (check.limit === 0) return deny();
    if (check.cost === 0) return undefined;
    const known = this.known.get(counterId(workspaceId, check));
    if (!known || known.sequence < sequence - 1 || known.sequence > sequence) return undefined;
    return estimateUsed(at, sequence, check.durationMs, countsFor(known, sequence)) >= check.limit ? deny() : undefined;
  }

  /** Forgets every count: after an outage the store may have restarted without them, and they prove nothing. */
  forget(): void {
    this.known.clear();
  }
}
