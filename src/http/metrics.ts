import { Counter, collectDefaultMetrics, Gauge, type MetricObjectWithValues, type MetricValue, Registry } from "prom-client";
import type { AnalyticsRuntime } from "../analytics/index.js";
import type { EventPipelineStats } from "../analytics/pipeline.js";
import type { CacheSample } from "../cache/cache-budget.js";
import type { CacheLookup, CacheName, Observer, RatelimitDecider, RatelimitSource, VerificationSource } from "../domain/observer.js";
import type { VerificationCode } from "../domain/verification/codes.js";
import type { Stores } from "../storage/interfaces.js";
import { BoundCounter, BoundHistogram } from "./bound-series.js";

/** Which face of keygate served a request (`forward_auth`: the gateway's forward-auth door, asked by a proxy). */
export type Face = "v2" | "gateway" | "forward_auth" | "other";

/** Why an upstream gave no answer (`no_healthy_target`: no call was made, every target of its pool being out). */
export type UpstreamErrorKind = "unreachable" | "timeout" | "reset" | "no_healthy_target";

/** What the gateway reports of its upstreams. */
export interface UpstreamObserver {
  upstreamAnswered(route: string, seconds: number): void;
  upstreamFailed(route: string, kind: UpstreamErrorKind): void;
}

/** One target of a route's upstream pool as a process sees it, when scraped. */
export interface UpstreamTargetSample {
  route: string;
  /** Its URL, credentials masked. */
  target: string;
  healthy: boolean;
  inFlight: number;
  ejections: number;
}

export const UNOBSERVED_UPSTREAMS: UpstreamObserver = { upstreamAnswered: () => {}, upstreamFailed: () => {} };

// Latency buckets from 0.5 ms (a cached verification) to 10 s (a slow upstream).
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const REDIS_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

let processRegistry: Registry | undefined;

/**
 * The process's own series (CPU, memory, event loop, GC), collected once per process whatever the number of
 * apps in it (tests build many), and served with each app's series.
 */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/**
 * The Prometheus series of one keygate app, in a registry of its own. Labels are bounded: procedure and route
 * names, outcome codes and status codes, never key ids, identifiers or addresses.
 */
export class Metrics implements Observer, UpstreamObserver {
  private readonly registry = new Registry();
  // The series counted on the request path are bound (bound-series.ts); the rest are prom-client's own.
  private readonly httpRequests = new BoundCounter({
    name: "keygate_http_requests_total",
    help: "HTTP requests answered, by face (v2, gateway, forward_auth, other), procedure or route, and status code.",
    labelNames: ["face", "route", "status"],
    registry: this.registry,
  });
  private readonly httpDuration = new BoundHistogram({
    name: "keygate_http_request_duration_seconds",
    help: "Time from a request's arrival to its answer, by face, procedure or route, and status code.",
    labelNames: ["face", "route", "status"],
    buckets: LATENCY_BUCKETS,
    registry: this.registry,
  });
  private readonly verifications = new BoundCounter({
    name: "keygate_verifications_total",
    help: "Key verifications, by source (api: keys.verifyKey, gateway) and outcome.",
    labelNames: ["source", "outcome"],
    registry: this.registry,
  });
  private readonly ratelimitDecisions = new BoundCounter({
    name: "keygate_ratelimit_decisions_total",
    help: "Rate limit calls, by source, result (allowed, denied) and who decided (redis, memory, local, fail_open, fail_closed, fail_local).",
    labelNames: ["source", "result", "decided"],
    registry: this.registry,
  });
  private readonly upstreamDuration = new BoundHistogram({
    name: "keygate_upstream_duration_seconds",
    help: "Time until a route's upstream answered with its status and headers, by gateway route.",
    labelNames: ["route"],
    buckets: LATENCY_BUCKETS,
    registry: this.registry,
  });
  private readonly upstreamErrors = new Counter({
    name: "keygate_upstream_errors_total",
    help: "Forwarded requests that got no answer from the upstream, by gateway route and kind (unreachable, timeout, reset).",
    labelNames: ["route", "kind"] as const,
    registers: [this.registry],
  });
  private readonly cacheLookups = new BoundCounter({
    name: "keygate_cache_lookups_total",
    help: "In-process cache lookups, by cache and result (hit, miss, stale).",
    labelNames: ["cache", "result"],
    registry: this.registry,
  });
  private readonly redisDuration = new BoundHistogram({
    name: "keygate_redis_command_duration_seconds",
    help: "Time Redis took to answer, by command (or the store operation it served), failures included.",
    labelNames: ["command"],
    buckets: REDIS_BUCKETS,
    registry: this.registry,
  });
  private readonly unhandledRejections = unhandledRejectionsCounter(this.registry);
  private readonly stopTimingCommands: () => void;
  private upstreamTargets: () => readonly UpstreamTargetSample[] = () => [];
  private cacheSamples: () => readonly CacheSample[] = () => [];

  constructor(stores: Stores, analytics: AnalyticsRuntime) {
    this.upstreamTargetSeries();
    this.cacheSeries();
    this.stopTimingCommands = stores.health.observeCommands((command, seconds) => this.redisDuration.observe(seconds, command));
    new Gauge({
      name: "keygate_redis_breaker_open",
      help: "1 while the Redis circuit breaker is open (Redis does not answer and calls fail fast), else 0.",
      registers: [this.registry],
      collect() {
        this.set(stores.health.state === "open" ? 1 : 0);
      },
    });
    analyticsSeries(this.registry, () => analytics.stats());
  }

  request(face: Face, route: string, status: number, seconds: number): void {
    const code = String(status);
    this.httpRequests.inc(face, route, code);
    this.httpDuration.observe(seconds, face, route, code);
  }

  verified(source: VerificationSource, outcome: VerificationCode): void {
    this.verifications.inc(source, outcome);
  }

  ratelimitDecided(source: RatelimitSource, allowed: boolean, decider: RatelimitDecider): void {
    this.ratelimitDecisions.inc(source, allowed ? "allowed" : "denied", decider);
  }

  cacheLookedUp(cache: CacheName, result: CacheLookup): void {
    this.cacheLookups.inc(cache, result);
  }

  upstreamAnswered(route: string, seconds: number): void {
    this.upstreamDuration.observe(seconds, route);
  }

  /** A rejection nothing handled (a bug): counted, the process serving on. */
  unhandledRejection(): void {
    this.unhandledRejections.inc();
  }

  upstreamFailed(route: string, kind: UpstreamErrorKind): void {
    this.upstreamErrors.inc({ route, kind });
  }

  /** Where the upstream pools' targets are read from when scraped (the gateway's pools). */
  watchUpstreamTargets(read: () => readonly UpstreamTargetSample[]): void {
    this.upstreamTargets = read;
  }

  /** Where the in-process caches' state is read from when scraped (Services.caches). */
  watchCaches(read: () => readonly CacheSample[]): void {
    this.cacheSamples = read;
  }

  /** Each in-process cache's entries, estimated bytes, budget and evictions, read when scraped (labelled by cache). */
  private cacheSeries(): void {
    const read = () => this.cacheSamples();
    const gauge = (name: string, help: string, value: (sample: CacheSample) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ["cache"] as const,
        registers: [this.registry],
        collect() {
          this.reset();
          for (const sample of read()) this.set({ cache: sample.cache }, value(sample));
        },
      });
    gauge("keygate_cache_entries", "Entries held by an in-process cache.", (sample) => sample.entries);
    gauge(
      "keygate_cache_bytes",
      "Bytes an in-process cache holds, as estimated per entry (its share of cache.maxBytes bounds it).",
      (sample) => sample.bytes,
    );
    gauge("keygate_cache_max_bytes", "An in-process cache's share of cache.maxBytes.", (sample) => sample.maxBytes);
    new Counter({
      name: "keygate_cache_evictions_total",
      help: "Entries an in-process cache dropped to stay within its bytes (least recently used first).",
      labelNames: ["cache"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const sample of read()) this.inc({ cache: sample.cache }, sample.evictions);
      },
    });
  }

  /**
   * Each pooled target's state, read when scraped. Labelled by route and target URL: bounded by the routes. Several
   * workers each have their own view: the primary keeps the lowest `healthy` (0 if any worker has the target out)
   * and adds up the rest.
   */
  private upstreamTargetSeries(): void {
    const read = () => this.upstreamTargets();
    const labelNames = ["route", "target"] as const;
    new Gauge({
      name: "keygate_upstream_target_healthy",
      help: "1 while requests go to an upstream pool's target, 0 while it is ejected (passive health) or down (active).",
      labelNames,
      registers: [this.registry],
      aggregator: "min",
      collect() {
        this.reset();
        for (const sample of read()) this.set({ route: sample.route, target: sample.target }, sample.healthy ? 1 : 0);
      },
    });
    new Gauge({
      name: "keygate_upstream_target_in_flight",
      help: "Calls in flight to an upstream pool's target.",
      labelNames,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const sample of read()) this.set({ route: sample.route, target: sample.target }, sample.inFlight);
      },
    });
    new Counter({
      name: "keygate_upstream_target_ejections_total",
      help: "Times an upstream pool's target was ejected by passive health checks (since its pool started).",
      labelNames,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const sample of read()) this.inc({ route: sample.route, target: sample.target }, sample.ejections);
      },
    });
  }

  /** Every series in the Prometheus text format: the process's, then this app's. */
  async text(): Promise<string> {
    return `${await processMetrics().metrics()}\n${await this.registry.metrics()}`;
  }

  /** The same series as JSON, for the primary of several workers to add up (prom-client's AggregatorRegistry). */
  async json(): Promise<MetricObjectWithValues<MetricValue<string>>[]> {
    const series = [...(await processMetrics().getMetricsAsJSON()), ...(await this.registry.getMetricsAsJSON())];
    return series as MetricObjectWithValues<MetricValue<string>>[];
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  close(): void {
    this.stopTimingCommands();
  }
}

/** The analytics event pipeline's series alone, in a registry of their own (the primary of several workers). */
/**
 * The series of a primary of several workers, added to theirs: its rejections nothing handled, and its analytics
 * pipeline's counters when it holds the embedded engine.
 */
export function primaryRegistry(stats: (() => EventPipelineStats) | undefined): { registry: Registry; unhandledRejection(): void } {
  const registry = new Registry();
  const rejections = unhandledRejectionsCounter(registry);
  if (stats) analyticsSeries(registry, stats);
  return { registry, unhandledRejection: () => rejections.inc() };
}

function unhandledRejectionsCounter(registry: Registry): Counter {
  return new Counter({
    name: "keygate_unhandled_rejections_total",
    help: "Promises rejected with nothing to handle the rejection: each is logged with its cause, and keygate serves on.",
    registers: [registry],
  });
}

/** The analytics event pipeline's counters, read when scraped. */
function analyticsSeries(registry: Registry, stats: () => EventPipelineStats): void {
  const counter = (name: string, help: string, read: () => number) =>
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  counter(
    "keygate_analytics_events_recorded_total",
    "Analytics events (verifications, rate limit decisions, gateway requests) handed to the pipeline.",
    () => stats().recorded,
  );
  counter("keygate_analytics_events_written_total", "Analytics events written to the engine.", () => stats().written);
  counter("keygate_analytics_batches_written_total", "Batches of events written.", () => stats().batchesWritten);
  counter("keygate_analytics_write_failures_total", "Failed attempts to write a batch.", () => stats().failedWrites);
  new Counter({
    name: "keygate_analytics_events_dropped_total",
    help: "Analytics events not written, by reason.",
    labelNames: ["reason"] as const,
    registers: [registry],
    collect() {
      const dropped = stats().dropped;
      this.reset();
      this.inc({ reason: "buffer_full" }, dropped.bufferFull);
      this.inc({ reason: "write_failed" }, dropped.writeFailed);
      this.inc({ reason: "after_close" }, dropped.afterClose);
      this.inc({ reason: "analytics_off" }, dropped.disabled);
    },
  });
  new Gauge({
    name: "keygate_analytics_events_buffered",
    help: "Analytics events waiting in memory to be written.",
    registers: [registry],
    collect() {
      this.set(stats().buffered);
    },
  });
}
