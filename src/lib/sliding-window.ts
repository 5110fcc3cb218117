/**
 * The rate limit algorithm: a sliding window estimated from two epoch-aligned fixed windows. The in-memory
 * counter store and the Redis fast path use these functions; the Lua script in
 * `storage/redis/lua/ratelimit.lua` does the same arithmetic and must stay in step with them.
 *
 * Fixed window `sequence` covers the milliseconds [sequence × d, (sequence + 1) × d). The sliding window at
 * `now` is the d milliseconds ending with `now` inclusive: all of the current fixed window so far, plus the last
 * d − elapsed − 1 milliseconds of the previous one, whose count is assumed to be spread evenly over it. (Counting
 * d − elapsed milliseconds there, as some implementations do, makes the window d + 1 ms long and denies one
 * request too many at exactly 1× load: every window's first request would be measured against a full window.)
 */

/** The two fixed-window counts a sliding-window estimate is made from. */
export interface WindowCounts {
  current: number;
  previous: number;
}

/** What is stored per counter: the current fixed window's sequence number and both counts. */
export interface StoredWindow extends WindowCounts {
  sequence: number;
}

export function windowSequence(nowMs: number, durationMs: number): number {
  return Math.floor(nowMs / durationMs);
}

/** Unix ms at which fixed window `sequence` ends (the `reset` of a response). */
export function windowEnd(sequence: number, durationMs: number): number {
  return (sequence + 1) * durationMs;
}

/**
 * The counts that apply to window `sequence`, given what was stored (possibly for an older window). A stored
 * window newer than `sequence` (a clock that went back) is not expected here; see `alignToStored`.
 */
export function countsFor(stored: StoredWindow | undefined, sequence: number): WindowCounts {
  if (!stored) return { current: 0, previous: 0 };
  if (stored.sequence === sequence) return { current: stored.current, previous: stored.previous };
  if (stored.sequence === sequence - 1) return { current: 0, previous: stored.current };
  return { current: 0, previous: 0 };
}

/**
 * The window and instant to evaluate at. When the clock reads earlier than a window already stored (a clock
 * that went back), the stored window is used from its start, so a backwards step can never admit more.
 */
export function alignToStored(nowMs: number, durationMs: number, stored: StoredWindow | undefined): { sequence: number; at: number } {
  const sequence = windowSequence(nowMs, durationMs);
  if (stored && stored.sequence > sequence) return { sequence: stored.sequence, at: stored.sequence * durationMs };
  return { sequence, at: nowMs };
}

/** Units used in the sliding window ending at `at` (inclusive), estimated from the counts of window `sequence`. */
export function estimateUsed(at: number, sequence: number, durationMs: number, counts: WindowCounts): number {
  const elapsed = at - sequence * durationMs;
  return counts.current + Math.floor((counts.previous * (durationMs - elapsed - 1)) / durationMs);
}
