import { LRUCache } from "lru-cache";
import { windowEnd, windowSequence } from "../../lib/sliding-window.js";
import type { CounterOutcome, CreditCheck, DecidedWindow, WindowCheck } from "../counter-interfaces.js";
import { counterId, REMEMBERED_COUNTERS_MAX } from "./counter-id.js";

/** Limits below this are always decided by the store: a reserved unit would be too large a share of them. */
export const MIN_LIMIT_TO_RESERVE = 1_000;

/** Units an instance reserves at a time: 1% of the limit, and never more than this. */
export const MAX_RESERVATION = 64;

/** The units a call may ask to reserve (0: none): only lone checks without credits, of limits large enough. */
export function reservationFor(checks: readonly WindowCheck[], credit: CreditCheck | undefined): number {
  if (credit || checks.length !== 1) return 0;
  const check = checks[0] as WindowCheck;
  if (check.limit < MIN_LIMIT_TO_RESERVE || check.cost < 1) return 0;
  return Math.min(MAX_RESERVATION, Math.floor(check.limit / 100));
}

/** Units of one counter's window that the store counted for this instance and that it has not admitted yet. */
interface Reservation {
  sequence: number;
  units: number;
  /** What the store had left besides these units when it last answered for this counter. */
  remaining: number;
}

/**
 * Admissions from units reserved in the shared store, within a stated budget. A call that may reserve
 * (reservationFor) asks the store for up to 1% of its limit besides its cost; the store grants them only on a
 * counter already in use and while the window stays at most half used (CounterCall.reserve). The next calls on
 * that counter in the same window are admitted here from those units, until they are used up. Units are counted
 * in the store before they are handed out, so no instance ever admits more than the limit. The price: units one
 * instance holds are not available to the others, and units left when the window ends stay counted in it, so up
 * to one reservation (plus one call's cost) per instance per window may be denied that an exact count would
 * admit. `remaining` answered from a reservation is what the store last said plus the units still held.
 */
export class Reservations {
  private readonly held = new LRUCache<string, Reservation>({ max: REMEMBERED_COUNTERS_MAX });
  /** Counters with a reservation asked for and not answered yet: one at a time per counter. */
  private readonly asking = new Set<string>();

  /** The call admitted from units this instance holds in its counter's window at `at`; undefined when it cannot be. */
  admit(
    workspaceId: string,
    checks: readonly WindowCheck[],
    credit: CreditCheck | undefined,
    at: number | undefined,
  ): CounterOutcome | undefined {
    if (reservationFor(checks, credit) === 0) return undefined;
    const check = checks[0] as WindowCheck;
    const reservation = this.held.get(counterId(workspaceId, check));
    if (!reservation || reservation.units < check.cost) return undefined;
    // `at` errs towards the future (StoreClock): a window it still places the call in has not ended.
    if (at === undefined || windowSequence(at, check.durationMs) !== reservation.sequence) return undefined;
    reservation.units -= check.cost;
    const remaining = reservation.remaining + reservation.units;
    return { passed: true, results: [{ passed: true, remaining, resetAt: windowEnd(reservation.sequence, check.durationMs) }], now: at };
  }

  /**
   * The units a call sent to the store asks to reserve. While one reservation of a counter is on its way, calls
   * on it ask for none; `settled` ends that.
   */
  ask(workspaceId: string, checks: readonly WindowCheck[], credit: CreditCheck | undefined): number {
    const units = reservationFor(checks, credit);
    if (units === 0) return 0;
    const key = counterId(workspaceId, checks[0] as WindowCheck);
    if (this.asking.has(key)) return 0;
    this.asking.add(key);
    return units;
  }

  /** The store answered (or failed) the call that asked for a reservation of this check's counter. */
  settled(workspaceId: string, check: WindowCheck): void {
    this.asking.delete(counterId(workspaceId, check));
  }

  /**
   * Records what the store answered for a check's counter: the units it reserved (added to those still held for
   * the same window; units of an earlier window are dropped) and what it has left besides. Returns the units now
   * held for the counter.
   */
  observe(workspaceId: string, check: WindowCheck, window: DecidedWindow, remaining: number): number {
    const key = counterId(workspaceId, check);
    let reservation = this.held.get(key);
    if (reservation && reservation.sequence !== window.sequence) {
      this.held.delete(key);
      reservation = undefined;
    }
    if (window.reserved > 0) {
      reservation = { sequence: window.sequence, units: (reservation?.units ?? 0) + window.reserved, remaining };
      this.held.set(key, reservation);
    } else if (reservation) {
      reservation.remaining = remaining;
    }
    return reservation?.units ?? 0;
  }

  /** Forgets every unit held: after an outage the store may have restarted without them, and handing them out could pass the limit. */
  forget(): void {
    this.held.clear();
  }
}
