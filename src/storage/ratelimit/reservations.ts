import { LRUCache } from "lru-cache";
import { windowEnd, windowSequence } from "../../lib/sliding-window.js";
import type { CounterOutcome, CreditCheck, DecidedWindow, WindowCheck, WindowResult } from "../counter-interfaces.js";
import { counterId, REMEMBERED_COUNTERS_MAX } from "./counter-id.js";

/** Limits below this are always decided by the store: a reserved unit would be too large a share of them. */
export const MIN_LIMIT_TO_RESERVE = 1_000;

/** Units an instance reserves at a time: 1% of the limit, and never more than this. */
export const MAX_RESERVATION = 64;

/** Checks of one call that may reserve at most (a route's limits with a key's: a handful). */
export const MAX_RESERVING_CHECKS = 8;

/**
 * Whether a call may reserve: no credit check, at most MAX_RESERVING_CHECKS checks, each consuming something of a
 * limit large enough, no two on one counter.
 */
export function mayReserve(checks: readonly WindowCheck[], credit: CreditCheck | undefined): boolean {
  if (credit || checks.length === 0 || checks.length > MAX_RESERVING_CHECKS) return false;
  for (let index = 0; index < checks.length; index++) {
    const check = checks[index] as WindowCheck;
    if (check.limit < MIN_LIMIT_TO_RESERVE || check.cost < 1) return false;
    for (let earlier = 0; earlier < index; earlier++) if (sameCounter(checks[earlier] as WindowCheck, check)) return false;
  }
  return true;
}

/** The units each check of a call may ask to reserve, in order (1% of its limit, MAX_RESERVATION at most); undefined when the call may not. */
export function reservationFor(checks: readonly WindowCheck[], credit: CreditCheck | undefined): readonly number[] | undefined {
  return mayReserve(checks, credit) ? checks.map((check) => Math.min(MAX_RESERVATION, Math.floor(check.limit / 100))) : undefined;
}

function sameCounter(a: WindowCheck, b: WindowCheck): boolean {
  return a.bucket === b.bucket && a.limit === b.limit && a.durationMs === b.durationMs;
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
 * (reservationFor) asks the store for up to 1% of each of its limits besides its costs; the store grants them only
 * on counters already in use and while each window stays at most half used (CounterCall.reserve). The next calls
 * with the same checks in the same windows are admitted here, all or nothing, while every counter of the call still
 * holds units for its cost. Units are counted in the store before they are handed out, so no instance ever admits
 * more than a limit. The price: units one instance holds are not available to the others, and units left when a
 * window ends stay counted in it, so up to one reservation (plus one call's cost) per instance per counter per
 * window may be denied that an exact count would admit. `remaining` answered from a reservation is what the store
 * last said plus the units still held.
 */
export class Reservations {
  private readonly held = new LRUCache<string, Reservation>({ max: REMEMBERED_COUNTERS_MAX });
  /** Counters with a reservation asked for and not answered yet: one at a time per counter. */
  private readonly asking = new Set<string>();

  /** The call admitted from units this instance holds in its counters' windows at `at`; undefined when it cannot be. */
  admit(
    workspaceId: string,
    checks: readonly WindowCheck[],
    credit: CreditCheck | undefined,
    at: number | undefined,
  ): CounterOutcome | undefined {
    // `at` errs towards the future (StoreClock): a window it still places the call in has not ended.
    if (at === undefined || !mayReserve(checks, credit)) return undefined;
    const reservations: Reservation[] = [];
    for (const check of checks) {
      const reservation = this.held.get(counterId(workspaceId, check));
      if (!reservation || reservation.units < check.cost || windowSequence(at, check.durationMs) !== reservation.sequence) return undefined;
      reservations.push(reservation);
    }
    // Every counter holds enough: the call is admitted on all of them.
    const results: WindowResult[] = [];
    for (let index = 0; index < checks.length; index++) {
      const check = checks[index] as WindowCheck;
      const reservation = reservations[index] as Reservation;
      reservation.units -= check.cost;
      const resetAt = windowEnd(reservation.sequence, check.durationMs);
      results.push({ passed: true, remaining: reservation.remaining + reservation.units, resetAt });
    }
    return { passed: true, results, now: at };
  }

  /**
   * The units a call sent to the store asks to reserve, per check; undefined for none. While a reservation of one of
   * its counters is on its way, the call asks for none; `settled` ends that.
   */
  ask(workspaceId: string, checks: readonly WindowCheck[], credit: CreditCheck | undefined): readonly number[] | undefined {
    const units = reservationFor(checks, credit);
    if (units === undefined) return undefined;
    const keys = checks.map((check) => counterId(workspaceId, check));
    if (keys.some((key) => this.asking.has(key))) return undefined;
    for (const key of keys) this.asking.add(key);
    return units;
  }

  /** The store answered (or failed) the call that asked for a reservation of these checks' counters. */
  settled(workspaceId: string, checks: readonly WindowCheck[]): void {
    for (const check of checks) this.asking.delete(counterId(workspaceId, check));
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
