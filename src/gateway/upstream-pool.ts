import type { UpstreamTargetHealth } from "../domain/routes/route-views.js";
import type { CompiledTarget, CompiledUpstream } from "../domain/routes/upstream-compiler.js";
import type { Clock } from "../lib/clock.js";
import { redactUrl } from "../lib/redact-url.js";

/** One target of a pool and what this process knows of it. */
export class PoolTarget {
  readonly url: URL;
  readonly origin: string;
  readonly weight: number;
  /** Its URL as shown (logs, metrics, getRoute): credentials masked. */
  readonly shown: string;
  /** Smooth weighted round-robin's running weight. */
  current = 0;
  inFlight = 0;
  /** Failures in a row (passive health). */
  failures = 0;
  /** Unix ms until which it is ejected; 0 while it is not. */
  ejectedUntil = 0;
  /** A request is trying it after its cool-down (half-open): no other goes until that one has settled. */
  trial = false;
  ejections = 0;
  /** The active probes' verdict (true until they say otherwise), and their results in a row. */
  probedHealthy = true;
  probesPassed = 0;
  probesFailed = 0;

  constructor(target: CompiledTarget) {
    this.url = target.url;
    this.origin = target.url.origin;
    this.weight = target.weight;
    this.shown = target.url.username || target.url.password ? redactUrl(target.url.href) : target.url.href;
  }
}

/**
 * The targets of one route's upstream on this process: which gets the next request (smooth weighted round-robin, as
 * nginx; or the fewest calls in flight per unit of weight, ties taken in round-robin order), and their health.
 * Passive: `failures` in a row eject a target for `cooldownMs`; once that is past, one request tries it (half-open)
 * and its success brings the target back, its failure ejects it again. Active probes take a target out and bring it
 * back on their own thresholds. A pool keeps no timer: time is read from the clock when a target is picked.
 */
export class UpstreamPool {
  readonly upstream: CompiledUpstream;
  readonly targets: readonly PoolTarget[];
  private readonly clock: Clock;

  constructor(upstream: CompiledUpstream, clock: Clock) {
    this.upstream = upstream;
    this.targets = upstream.targets.map((target) => new PoolTarget(target));
    this.clock = clock;
  }

  /**
   * The target for the next call, not one of `tried`, its call counted in flight (settle it with `answered`,
   * `failed` or `released`); undefined when none is healthy.
   */
  pick(tried?: readonly PoolTarget[]): PoolTarget | undefined {
    const now = this.clock.now();
    const leastConnections = this.upstream.balance === "least-connections";
    let fewest = Number.POSITIVE_INFINITY;
    if (leastConnections) {
      for (const target of this.targets) {
        if (this.available(target, now, tried)) fewest = Math.min(fewest, target.inFlight / target.weight);
      }
    }
    let total = 0;
    let best: PoolTarget | undefined;
    for (const target of this.targets) {
      if (!this.available(target, now, tried)) continue;
      if (leastConnections && target.inFlight / target.weight > fewest) continue;
      target.current += target.weight;
      total += target.weight;
      if (best === undefined || target.current > best.current) best = target;
    }
    if (best === undefined) return undefined;
    best.current -= total;
    best.inFlight++;
    if (best.ejectedUntil !== 0) best.trial = true;
    return best;
  }

  /** A call that got an answer: a success, unless it is a 5xx and those count as failures (then see `failed`). */
  answered(target: PoolTarget, status: number): boolean {
    if (status >= 500 && this.upstream.passive?.on5xx) return this.failed(target);
    target.inFlight--;
    target.failures = 0;
    target.ejectedUntil = 0;
    target.trial = false;
    return false;
  }

  /** A call the target failed (refused, reset, timed out): one more failure in a row. Returns whether it was ejected. */
  failed(target: PoolTarget): boolean {
    target.inFlight--;
    target.failures++;
    const passive = this.upstream.passive;
    if (passive === undefined || !(target.trial || (target.ejectedUntil === 0 && target.failures >= passive.failures))) return false;
    target.ejectedUntil = this.clock.now() + passive.cooldownMs;
    target.trial = false;
    target.ejections++;
    return true;
  }

  /** A call that ended saying nothing of the target (the client left first). */
  released(target: PoolTarget): void {
    target.inFlight--;
    target.trial = false;
  }

  /** One call's settling, done once whichever comes first (an upgrade: answered, failed, or the client gone). */
  once(target: PoolTarget): { answered(status: number): void; failed(): void; released(): void } {
    let settled = false;
    const settle = (how: () => unknown) => {
      if (!settled) how();
      settled = true;
    };
    return {
      answered: (status) => settle(() => this.answered(target, status)),
      failed: () => settle(() => this.failed(target)),
      released: () => settle(() => this.released(target)),
    };
  }

  /** An active probe's result; returns whether the target's verdict changed. */
  probed(target: PoolTarget, passed: boolean): boolean {
    const active = this.upstream.active;
    if (active === undefined) return false;
    if (passed) {
      target.probesPassed++;
      target.probesFailed = 0;
      if (target.probedHealthy || target.probesPassed < active.healthyThreshold) return false;
      target.probedHealthy = true;
      // Seen answering: a passive ejection ends too.
      target.ejectedUntil = 0;
      target.failures = 0;
      return true;
    }
    target.probesFailed++;
    target.probesPassed = 0;
    if (!target.probedHealthy || target.probesFailed < active.unhealthyThreshold) return false;
    target.probedHealthy = false;
    return true;
  }

  /** Each target's state, as getRoute shows it. */
  health(): UpstreamTargetHealth[] {
    return this.targets.map((target) => {
      const health: UpstreamTargetHealth = {
        url: target.shown,
        weight: target.weight,
        healthy: target.probedHealthy && target.ejectedUntil === 0,
        failures: target.failures,
        inFlight: target.inFlight,
        ejections: target.ejections,
      };
      if (target.ejectedUntil !== 0) health.ejectedUntil = target.ejectedUntil;
      if (this.upstream.active !== undefined) health.probedHealthy = target.probedHealthy;
      return health;
    });
  }

  private available(target: PoolTarget, now: number, tried: readonly PoolTarget[] | undefined): boolean {
    if (!target.probedHealthy || tried?.includes(target)) return false;
    return target.ejectedUntil === 0 || (now >= target.ejectedUntil && !target.trial);
  }
}
