import type { VerificationCode } from "./verification/codes.js";

/** Where a verification was asked for: keys.verifyKey (`api`) or a request through the gateway. */
export type VerificationSource = "api" | "gateway";

/** Which kind of call asked the rate limiter: ratelimit.limit, ratelimit.multiLimit, a key's limits, the gateway. */
export type RatelimitSource = "ratelimit.limit" | "multiLimit" | "key" | "gateway";

/**
 * Who decided a rate limit call: the shared counters (`redis`, or `memory` without Redis); this instance alone
 * from what it already knew (`local`: reserved units, a window known to be exhausted); or, while the shared
 * counters could not answer, the fail mode (`fail_open`, `fail_closed`, `fail_local`).
 */
export type RatelimitDecider = "redis" | "memory" | "local" | "fail_open" | "fail_closed" | "fail_local";

export type CacheName = "keys" | "root_keys" | "namespaces";
/** `stale`: an entry past its fresh age was served (while it reloads, or because the reload failed). */
export type CacheLookup = "hit" | "miss" | "stale";

/**
 * What the domain reports as it decides, for metrics. Every method is called on the request path and must return
 * at once; the values are bounded sets, never key ids, identifiers or addresses.
 */
export interface Observer {
  verified(source: VerificationSource, outcome: VerificationCode): void;
  ratelimitDecided(source: RatelimitSource, allowed: boolean, decider: RatelimitDecider): void;
  cacheLookedUp(cache: CacheName, result: CacheLookup): void;
}

/** An observer that keeps nothing: the CLI, and unit tests that do not look. */
export const UNOBSERVED: Observer = {
  verified: () => {},
  ratelimitDecided: () => {},
  cacheLookedUp: () => {},
};
