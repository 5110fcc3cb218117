import type { Clock } from "../../src/lib/clock.js";

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
