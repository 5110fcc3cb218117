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

/** A scheduler whose tasks run only when `advance` moves its clock past their time. */
export class ManualScheduler {
  private readonly clock: ManualClock;
  private tasks: { at: number; task: () => void }[] = [];

  constructor(clock: ManualClock) {
    this.clock = clock;
  }

  schedule(task: () => void, ms: number): () => void {
    const entry = { at: this.clock.now() + ms, task };
    this.tasks.push(entry);
    return () => {
      this.tasks = this.tasks.filter((pending) => pending !== entry);
    };
  }

  /** Tasks scheduled and not yet run nor cancelled. */
  get pending(): number {
    return this.tasks.length;
  }

  /** Moves the clock by `ms`, running each task that falls due on the way at its own time. */
  advance(ms: number): void {
    const until = this.clock.now() + ms;
    for (;;) {
      const next = this.tasks.filter((pending) => pending.at <= until).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      this.tasks = this.tasks.filter((pending) => pending !== next);
      this.clock.set(Math.max(this.clock.now(), next.at));
      next.task();
    }
    this.clock.set(until);
  }
}
