import type { Clock } from "./clock.js";

export type CircuitState = "closed" | "open" | "probing";

export interface CircuitBreakerOptions {
  /** Consecutive failures that open the circuit. */
  failureThreshold: number;
  /** How long the circuit stays open before a probe may close it again. */
  openMs: number;
  clock: Clock;
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
 * `failureThreshold` consecutive failures the circuit opens and calls fail at once. Once `openMs` has passed, the
 * next call starts one background probe (and still fails fast); when the probe succeeds the circuit closes, and
 * when it fails the circuit stays open for another `openMs`. No timers: time is read from the clock on each call,
 * so tests drive it with a manual clock.
 */
export class CircuitBreaker {
  private current: CircuitState = "closed";
  private consecutiveFailures = 0;
  private openedAt = 0;
  private readonly listeners: ((state: CircuitState) => void)[] = [];
  private readonly options: CircuitBreakerOptions;

  constructor(options: CircuitBreakerOptions) {
    this.options = options;
  }

  get state(): CircuitState {
    return this.current;
  }

  /** Called on every change of state (for logs and metrics). */
  onStateChange(listener: (state: CircuitState) => void): void {
    this.listeners.push(listener);
  }

  async run<T>(operation: () => Promise<T>): Promise<T> {
    if (this.current !== "closed") {
      this.maybeProbe();
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
  }

  private maybeProbe(): void {
    if (this.current !== "open" || this.options.clock.now() < this.openedAt + this.options.openMs) return;
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
