import type { AnalyticsQuotaStore, QuotaUsage } from "../interfaces.js";

interface Window {
  workspaceId: string;
  windowStart: number;
  expiresAt: number;
  usage: QuotaUsage;
}

/** The quota of one process. Windows that ended are dropped whenever a later window is touched. */
export class MemoryAnalyticsQuotaStore implements AnalyticsQuotaStore {
  private readonly windows = new Map<string, Window>();

  async acquire(
    workspaceId: string,
    windowStart: number,
    windowMs: number,
    limits: QuotaUsage,
  ): Promise<{ allowed: boolean; usage: QuotaUsage }> {
    const window = this.window(workspaceId, windowStart, windowMs);
    const allowed = window.usage.queries < limits.queries && window.usage.executionMs < limits.executionMs;
    if (allowed) window.usage.queries += 1;
    return { allowed, usage: { ...window.usage } };
  }

  async addExecutionMs(workspaceId: string, windowStart: number, windowMs: number, ms: number): Promise<void> {
    this.window(workspaceId, windowStart, windowMs).usage.executionMs += ms;
  }

  private window(workspaceId: string, windowStart: number, windowMs: number): Window {
    const id = `${workspaceId}\u0000${windowStart}`;
    let window = this.windows.get(id);
    if (!window) {
      for (const [otherId, other] of this.windows) if (other.expiresAt <= windowStart) this.windows.delete(otherId);
      window = { workspaceId, windowStart, expiresAt: windowStart + windowMs, usage: { queries: 0, executionMs: 0 } };
      this.windows.set(id, window);
    }
    return window;
  }
}
