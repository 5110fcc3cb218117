import type { Scheduler } from "../../lib/scheduler.js";
import type { UsageReporter } from "./usage-reporter.js";

/**
 * Runs the usage reporter in the background: a pass every intervalMs, and again at once after a pass that made
 * reports (a backlog is worked off a few periods at a time). Stopping waits for the pass under way and gives the
 * lease up, so another instance takes over without waiting for it to run out.
 */
export class UsageReportRunner {
  private readonly reporter: UsageReporter;
  private readonly scheduler: Scheduler;
  private readonly intervalMs: number;
  private readonly onError: (error: unknown) => void;
  private cancel: (() => void) | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;

  constructor(reporter: UsageReporter, scheduler: Scheduler, intervalMs: number, onError: (error: unknown) => void) {
    this.reporter = reporter;
    this.scheduler = scheduler;
    this.intervalMs = intervalMs;
    this.onError = onError;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule(0);
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.cancel?.();
    await this.running;
    await this.reporter.release().catch(this.onError);
  }

  private schedule(ms: number): void {
    this.cancel = this.scheduler.schedule(() => {
      this.cancel = undefined;
      this.running = this.pass();
    }, ms);
  }

  private async pass(): Promise<void> {
    let made = 0;
    try {
      const produced = await this.reporter.produce();
      made = produced.reports + produced.corrections;
    } catch (error) {
      this.onError(error);
    }
    this.running = undefined;
    if (!this.stopped) this.schedule(made > 0 ? 0 : this.intervalMs);
  }
}
