import { KeygateError } from "../errors/keygate-error.js";

/**
 * A store did not answer in time, or is known to be down (its circuit is open). Services that can do without
 * the store (the rate limiter's fail modes) catch it; anywhere else it reaches the client as a 500
 * `service_unavailable` that says nothing about the cause, which stays in `cause` for the log.
 */
export class StoreUnavailableError extends KeygateError {
  /** How long until the store may be tried again, when known (the circuit's remaining open time). */
  readonly retryAfterMs: number | undefined;

  constructor(cause: unknown, retryAfterMs?: number) {
    super("err:unkey:application:service_unavailable", "A backing store did not answer in time. Try again shortly.", { cause });
    this.name = "StoreUnavailableError";
    this.retryAfterMs = retryAfterMs;
  }
}

export function isStoreUnavailable(error: unknown): error is StoreUnavailableError {
  return error instanceof StoreUnavailableError;
}
