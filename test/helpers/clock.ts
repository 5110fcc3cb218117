import type { Clock } from "../../src/lib/clock.js";

/**
 * The longest rate limit window (30 days), for tests on the real clock that count exact admissions over several
 * calls: were a window boundary to pass between them, the sliding estimate (the previous window's count, decaying)
 * would rightly admit one more, and the test would fail by chance. With 30-day windows that cannot happen in a run.
 */
export const LONGEST_WINDOW_MS = 2_592_000_000;

/** A clock that only moves when told to. */
export class ManualClock implements Clock {
  private current: number;

  constructor(start = Date.UTC(2026, 0, 15, 12, 0, 0)) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  advance(ms: number): void {
    this.current += ms;
  }

  set(ms: number): void {
    this.current = ms;
  }
}
