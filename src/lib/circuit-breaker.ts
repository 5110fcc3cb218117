import type { Clock } from "./clock.js";
import { type Scheduler, systemScheduler } from "./scheduler.js";

export type CircuitState = "closed" | "open" | "probing";

export interface CircuitBreakerOptions {
  /** Consecutive failures that open the circuit. */
  failureThreshold: number;
  /** How long the circuit stays open before a probe may close it again; while open, a probe runs every openMs. */
  openMs: number;
  clock: Clock;
  /** Runs the background probes (tests inject one); Node timers, unref'd, otherwise. */
  scheduler?: Scheduler;
  /** A cheap call that shows the backend answers again (Redis: PING). It runs in the background, never in a request. */
  probe: () => Promise<unknown>;
  /** Which errors mean the backend is failing. Others (a bug in a script, say) pass through and are not counted. */
  isFailure?: (error: unknown) => boolean;
}

/** Thrown instead of calling the backend while the circuit is open. */
export class CircuitOpenError extends Error {
  /** How long until a probe may close the circuit (0 when one may start now or is running). */
  readonly retryAfterMs: number;

  constructor(retryAfterMs: number) {
    super("the circuit is open: the backend failed repeatedly and is not being called");
    this.name = "CircuitOpenError";
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * Turns a backend that keeps failing (or keeps missing its deadline) into fast failures. After
 * `failureThreshold` consecutive failures the circuit opens and calls fail at once. While it is open, a background
 * probe runs every `openMs` (a timer, so the circuit closes when the backend answers again even if no call comes);
 * a call that arrives once `openMs` has passed and finds no probe under way starts one at once (a timer can be
 * late on a busy event loop) and still fails fast. A successful probe closes the circuit; a failed one keeps it
 * open for another `openMs`. Time comes from the clock and the timers from the scheduler, so tests drive both.
 */
export class CircuitBreaker {
  private current: CircuitState = "closed";
  private consecutiveFailures = 0;
  private openedAt = 0;
  private cancelProbe: (() => void) | undefined;
  private stopped = false;
  private readonly listeners: ((state: CircuitState) => void)[] = [];
  private readonly options: CircuitBreakerOptions;
  private readonly scheduler: Scheduler;

  constructor(options: CircuitBreakerOptions) {
    this.options = options;
    this.scheduler = options.scheduler ?? systemScheduler;
  }

  get state(): CircuitState {
    return this.current;
  }

  /** Called on every change of state (for logs and metrics). */
  onStateChange(listener: (state: CircuitState) => void): void {
    this.listeners.push(listener);
  }

  /** Cancels the pending background probe and schedules none again (shutdown). Calls still pass or fail fast. */
  stop(): void {
    this.stopped = true;
    this.cancelProbe?.();
    this.cancelProbe = undefined;
  }

  async run<T>(operation: () => Promise<T>): Promise<T> {
    if (this.current !== "closed") {
      if (this.current === "open" && this.options.clock.now() >= this.openedAt + this.options.openMs) this.probe();
      throw new CircuitOpenError(this.current === "open" ? Math.max(0, this.openedAt + this.options.openMs - this.options.clock.now()) : 0);
    }
    try {
      const result = await operation();
      this.consecutiveFailures = 0;
      return result;
    } catch (error) {
      if (this.options.isFailure?.(error) ?? true) this.recordFailure();
      throw error;
    }
  }

  private recordFailure(): void {
    this.consecutiveFailures++;
    if (this.current === "closed" && this.consecutiveFailures >= this.options.failureThreshold) this.open();
  }

  private open(): void {
    this.openedAt = this.options.clock.now();
    this.transition("open");
    if (this.stopped) return;
    this.cancelProbe?.();
    this.cancelProbe = this.scheduler.schedule(() => {
      this.cancelProbe = undefined;
      if (this.current === "open") this.probe();
    }, this.options.openMs);
  }

  /** One probe at a time: the state is "probing" until it settles. */
  private probe(): void {
    this.cancelProbe?.();
    this.cancelProbe = undefined;
    this.transition("probing");
    this.options.probe().then(
      () => {
        this.consecutiveFailures = 0;
        this.transition("closed");
      },
      () => this.open(),
    );
  }

  private transition(state: CircuitState): void {
    if (state === this.current) return;
    this.current = state;
    for (const listener of this.listeners) listener(state);
  }
}
