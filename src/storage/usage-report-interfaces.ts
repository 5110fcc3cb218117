/**
 * Usage reports (docs/usage.md): which instance produces them now, and how far each webhook endpoint's reports have
 * got. Times are unix ms from the instances' clocks, passed in (never the store's own), so that a lease and the
 * periods are judged by the same clock.
 */
export interface UsageReportStore {
  /**
   * Takes the producer's lease for `owner` until `now + ttlMs`, or extends it when `owner` holds it. False while
   * another owner holds it, until its time is up.
   */
  lease(owner: string, now: number, ttlMs: number): Promise<boolean>;
  /** Gives the lease up, when `owner` holds it. */
  release(owner: string): Promise<void>;
  /** The end of the last period whose reports are in the outbox for the endpoint (unix ms), or null before its first. */
  progress(endpointId: string): Promise<number | null>;
  /**
   * Moves the endpoint's progress from `from` to `to` and keeps what the periods reported, in one step, provided
   * `owner` holds the lease at `now` and the progress is still `from`. False (nothing written) otherwise: another
   * instance produces now, or has produced these periods.
   */
  commit(commit: UsageReportCommit): Promise<boolean>;
  /** What the endpoint's period starting at `periodStart` reported, by subject, while it is kept ({} after). */
  reported(endpointId: string, periodStart: number): Promise<Record<string, string>>;
}

export interface UsageReportCommit {
  owner: string;
  now: number;
  endpointId: string;
  from: number | null;
  to: number;
  /** For each period: subject → what was reported for it (set or replaced; other subjects are kept). */
  reported: readonly { periodStart: number; subjects: Readonly<Record<string, string>> }[];
  /** How long what a period reported is kept (how far back corrections look, with a margin). */
  keepMs: number;
}
