import type { Clock } from "../../lib/clock.js";
import type { UsageReportCommit, UsageReportStore } from "../usage-report-interfaces.js";

/** Usage report progress in this process's memory: one instance, so the lease only orders its own passes. */
export class MemoryUsageReportStore implements UsageReportStore {
  private readonly clock: Clock;
  private holder: { owner: string; until: number } | undefined;
  private readonly progressOf = new Map<string, number>();
  private readonly kept = new Map<string, { subjects: Map<string, string>; until: number }>();

  /** `clock` only ages out what periods reported (keepMs); the lease is judged by the `now` each call passes. */
  constructor(clock: Clock) {
    this.clock = clock;
  }

  async lease(owner: string, now: number, ttlMs: number): Promise<boolean> {
    if (this.holder && this.holder.owner !== owner && this.holder.until > now) return false;
    this.holder = { owner, until: now + ttlMs };
    return true;
  }

  async release(owner: string): Promise<void> {
    if (this.holder?.owner === owner) this.holder = undefined;
  }

  async progress(endpointId: string): Promise<number | null> {
    return this.progressOf.get(endpointId) ?? null;
  }

  async commit(commit: UsageReportCommit): Promise<boolean> {
    if (this.holder?.owner !== commit.owner || this.holder.until <= commit.now) return false;
    if ((this.progressOf.get(commit.endpointId) ?? null) !== commit.from) return false;
    this.progressOf.set(commit.endpointId, commit.to);
    const until = this.clock.now() + commit.keepMs;
    for (const { periodStart, subjects } of commit.reported) {
      const name = `${commit.endpointId}:${periodStart}`;
      const entry = this.live(name) ?? { subjects: new Map<string, string>(), until };
      for (const [subject, numbers] of Object.entries(subjects)) entry.subjects.set(subject, numbers);
      entry.until = until;
      this.kept.set(name, entry);
    }
    return true;
  }

  async reported(endpointId: string, periodStart: number): Promise<Record<string, string>> {
    return Object.fromEntries(this.live(`${endpointId}:${periodStart}`)?.subjects ?? []);
  }

  private live(name: string) {
    const entry = this.kept.get(name);
    if (entry && entry.until <= this.clock.now()) {
      this.kept.delete(name);
      return undefined;
    }
    return entry;
  }
}
