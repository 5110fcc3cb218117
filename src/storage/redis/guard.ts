import { CircuitBreaker, CircuitOpenError } from "../../lib/circuit-breaker.js";
import type { Clock } from "../../lib/clock.js";
import type { CommandListener, StoreHealth } from "../interfaces.js";
import { StoreUnavailableError } from "../unavailable.js";
import { WriteNotReplicatedError } from "./replica-wait.js";

/**
 * Error replies that mean "Redis cannot serve right now" rather than "this command is wrong": loading a dataset,
 * busy with a script, read-only after a failover, out of memory, a cluster that is down.
 */
const UNAVAILABLE_REPLY = /^(LOADING|BUSY|TRYAGAIN|CLUSTERDOWN|MASTERDOWN|READONLY|NOREPLICAS|OOM)\b/;

/**
 * Whether a failed Redis call means Redis is unavailable: every connection error and missed deadline counts, and
 * of the error replies only those above. Other replies (an error in a script) are bugs and are not counted.
 */
export function isRedisUnavailable(error: unknown): boolean {
  if (error instanceof WriteNotReplicatedError) return false;
  if (error instanceof Error && error.name === "ReplyError") return UNAVAILABLE_REPLY.test(error.message);
  return true;
}

/**
 * Runs Redis calls behind a circuit breaker and turns unavailability into StoreUnavailableError, so a slow or
 * absent Redis costs each caller at most one command deadline until the breaker opens, and nothing after.
 */
export class RedisGuard {
  readonly breaker: CircuitBreaker;
  private readonly listeners = new Set<CommandListener>();

  constructor(breaker: CircuitBreaker) {
    this.breaker = breaker;
  }

  /** Runs `operation`, named `command` for the timings (a Redis command, or the store operation it serves). */
  async run<T>(command: string, operation: () => Promise<T>): Promise<T> {
    const timed = this.listeners.size > 0;
    const startedAt = timed ? performance.now() : 0;
    try {
      return await this.breaker.run(operation);
    } catch (error) {
      if (error instanceof CircuitOpenError) throw new StoreUnavailableError(error, error.retryAfterMs);
      if (isRedisUnavailable(error)) throw new StoreUnavailableError(error);
      throw error;
    } finally {
      if (timed) {
        const seconds = (performance.now() - startedAt) / 1000;
        for (const listener of this.listeners) listener(command, seconds);
      }
    }
  }

  /** Calls `listener` after every guarded call with its name and duration, until the returned function is called. */
  observe(listener: CommandListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

/** The health of Redis as its guard sees it: the breaker's state, and a PING through the guard. */
export function redisHealth(redis: { ping(): Promise<unknown> }, guard: RedisGuard): StoreHealth {
  return {
    get state() {
      return guard.breaker.state;
    },
    onStateChange: (listener) => guard.breaker.onStateChange(listener),
    check: async () => {
      await guard.run("ping", () => redis.ping());
    },
    observeCommands: (listener) => guard.observe(listener),
  };
}

/** Whether a failed call was refused by the open breaker, so that Redis never saw it. */
export function neverSent(error: unknown): boolean {
  return error instanceof StoreUnavailableError && error.cause instanceof CircuitOpenError;
}

export interface BreakerSettings {
  failureThreshold: number;
  openMs: number;
}

/** The breaker when the caller gives none: 3 failed calls in a row open it, and it probes every second. */
export const DEFAULT_BREAKER: BreakerSettings = { failureThreshold: 3, openMs: 1_000 };

/** The breaker of one Redis connection; it probes with PING. */
export function redisBreaker(redis: { ping(): Promise<unknown> }, settings: BreakerSettings, clock: Clock): CircuitBreaker {
  return new CircuitBreaker({ ...settings, clock, probe: () => redis.ping(), isFailure: isRedisUnavailable });
}

/** Client methods that manage the connection rather than send a command: they pass through unguarded. */
const LIFECYCLE = new Set([
  "on",
  "once",
  "off",
  "emit",
  "addListener",
  "removeListener",
  "removeAllListeners",
  "listeners",
  "connect",
  "disconnect",
  "quit",
  "duplicate",
  "defineCommand",
  // A Cluster's node clients (synchronous); commands sent to one directly are not guarded.
  "nodes",
]);

/**
 * The client as the record stores see it: every command runs through `guard` (deadline, breaker, and
 * StoreUnavailableError when Redis cannot answer), so an outage is bounded and reported the same way for
 * management and verification reads as for rate limits. Connection management passes through.
 */
export function guardedClient<C extends object>(client: C, guard: RedisGuard): C {
  return new Proxy(client, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== "function" || typeof property !== "string" || LIFECYCLE.has(property)) return value;
      return (...args: unknown[]) => guard.run(property, () => (value as (...a: unknown[]) => Promise<unknown>).apply(target, args));
    },
  });
}
