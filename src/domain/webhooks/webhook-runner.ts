import type { Scheduler } from "../../lib/scheduler.js";

export interface RunnerDeps {
  /** One delivery pass; resolves with the attempts it made. */
  deliver: () => Promise<number>;
  /** One key.expiring scan. */
  scan: () => Promise<unknown>;
  scheduler: Scheduler;
  /** How often an idle instance looks for due deliveries (others' enqueues, retries coming due). */
  pollMs: number;
  scanIntervalMs: number;
  onError: (error: unknown) => void;
}

/**
 * Runs the deliverer in the background: again at once while there was work, every pollMs otherwise, and at once
 * when this instance enqueued something (wake). The key.expiring scan runs every scanIntervalMs.
 */
export class WebhookRunner {
  private readonly deps: RunnerDeps;
  private cancelDelivery: (() => void) | undefined;
  private cancelScan: (() => void) | undefined;
  private delivering: Promise<void> | undefined;
  private scanning: Promise<void> | undefined;
  private wakeRequested = false;
  private stopped = true;

  constructor(deps: RunnerDeps) {
    this.deps = deps;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule(0);
    this.scheduleScan();
  }

  /** Delivers soon: something was just enqueued. */
  wake(): void {
    if (this.stopped) return;
    if (this.delivering) {
      this.wakeRequested = true;
      return;
    }
    this.schedule(0);
  }

  /** Stops scheduling and waits for the pass under way, so a lease is released before the stores close. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelDelivery?.();
    this.cancelScan?.();
    await this.delivering;
    await this.scanning;
  }

  private schedule(ms: number): void {
    this.cancelDelivery?.();
    this.cancelDelivery = this.deps.scheduler.schedule(() => {
      this.cancelDelivery = undefined;
      this.delivering = this.pass();
    }, ms);
  }

  private async pass(): Promise<void> {
    this.wakeRequested = false;
    let attempts = 0;
    try {
      attempts = await this.deps.deliver();
    } catch (error) {
      this.deps.onError(error);
    }
    this.delivering = undefined;
    if (!this.stopped) this.schedule(attempts > 0 || this.wakeRequested ? 0 : this.deps.pollMs);
  }

  private scheduleScan(): void {
    this.cancelScan = this.deps.scheduler.schedule(() => {
      this.scanning = this.deps
        .scan()
        .then(
          () => {},
          (error) => this.deps.onError(error),
        )
        .finally(() => {
          this.scanning = undefined;
          if (!this.stopped) this.scheduleScan();
        });
    }, this.deps.scanIntervalMs);
  }
}
