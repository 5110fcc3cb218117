import type { FastifyBaseLogger } from "fastify";
import type { Dispatcher } from "undici";
import type { UpstreamTargetHealth } from "../domain/routes/route-views.js";
import type { UpstreamTargetSample } from "../http/metrics.js";
import type { Clock } from "../lib/clock.js";
import type { CurrentGatewaySnapshot } from "./gateway-snapshot.js";
import type { CompiledRoute } from "./route-table.js";
import { UpstreamClient, upstreamAgent } from "./upstream-client.js";
import type { ApiUpstreamGuard } from "./upstream-guard.js";
import { type PoolTarget, UpstreamPool } from "./upstream-pool.js";

/** A route's pool on this process, with the connections it uses and its probes. */
export interface PoolEntry {
  readonly route: string;
  readonly pool: UpstreamPool;
  /** Its own connections (TLS settings of its own); undefined: the shared ones. */
  readonly dispatcher: Dispatcher | undefined;
  readonly fingerprint: string;
  probes?: NodeJS.Timeout;
}

export interface UpstreamPoolsOptions {
  clock: Clock;
  log: FastifyBaseLogger;
  /** The routes in force: a pool for each, taken up with every new table. */
  snapshot: CurrentGatewaySnapshot;
  /** Every connection of a route made through the API (its calls and its probes) is checked by it. */
  apiUpstreams: ApiUpstreamGuard;
}

/**
 * The upstream pools of this process's routes, by route id. A route table swap (a reload, a stored change) keeps the
 * pool, and so its targets' health, of each route whose upstream is the same (`fingerprint`); a pool whose route went
 * or changed its upstream is stopped: its probes end and its own connections close once their calls are done.
 * Health is each process's own (workers do not share it), as are the probes.
 */
export class UpstreamPools {
  private readonly options: UpstreamPoolsOptions;
  private readonly entries = new Map<string, PoolEntry>();
  /** The entry of each compiled route seen, so a request finds its pool with one lookup. */
  private readonly byRoute = new WeakMap<CompiledRoute, PoolEntry>();
  /** Once closed, no probe starts again (a table swapped in while the app closes). */
  private closed = false;

  /** The HTTP client to every upstream: the shared connections, and the calls of every pool. */
  readonly client = new UpstreamClient();

  constructor(options: UpstreamPoolsOptions) {
    this.options = options;
    this.reconcile(options.snapshot.current.table.routes);
    options.snapshot.watch((snapshot) => this.reconcile(snapshot.table.routes));
  }

  /** The pool `route` is served with, made (and its probes started) when it has none yet. */
  of(route: CompiledRoute): PoolEntry {
    const seen = this.byRoute.get(route);
    if (seen !== undefined) return seen;
    let entry = this.entries.get(route.id);
    if (entry?.fingerprint !== this.fingerprint(route)) {
      if (entry !== undefined) this.stopInBackground(entry);
      entry = this.start(route);
      this.entries.set(route.id, entry);
    }
    this.byRoute.set(route, entry);
    return entry;
  }

  /** Takes up a new route table: a pool for each route, and those of routes no longer there (or changed) stopped. */
  reconcile(routes: readonly CompiledRoute[]): void {
    if (this.closed) return;
    const ids = new Set<string>();
    for (const route of routes) {
      ids.add(route.id);
      this.of(route);
    }
    for (const [id, entry] of this.entries) {
      if (ids.has(id)) continue;
      this.stopInBackground(entry);
      this.entries.delete(id);
    }
  }

  /** The state of a route's targets, when its upstream is a pool. */
  health(routeId: string): UpstreamTargetHealth[] | undefined {
    const entry = this.entries.get(routeId);
    return entry?.pool.upstream.pooled ? entry.pool.health() : undefined;
  }

  /** Every pooled target's state, for the metrics. */
  samples(): UpstreamTargetSample[] {
    const samples: UpstreamTargetSample[] = [];
    for (const { route, pool } of this.entries.values()) {
      if (!pool.upstream.pooled) continue;
      for (const health of pool.health()) {
        samples.push({ route, target: health.url, healthy: health.healthy, inFlight: health.inFlight, ejections: health.ejections });
      }
    }
    return samples;
  }

  /** Stops every probe and closes every pool's own connections, then the shared ones. */
  async close(): Promise<void> {
    this.closed = true;
    const closing = [...this.entries.values()].map((entry) => this.stop(entry));
    this.entries.clear();
    await Promise.all(closing);
    await this.client.close();
  }

  private start(route: CompiledRoute): PoolEntry {
    const { pool: upstream } = route;
    const tls = upstream.tls;
    const entry: PoolEntry = {
      route: route.name,
      pool: new UpstreamPool(upstream, this.options.clock),
      dispatcher:
        route.definition.source === "api" ? this.options.apiUpstreams.dispatcher(tls) : tls === undefined ? undefined : upstreamAgent(tls),
      fingerprint: this.fingerprint(route),
    };
    const active = upstream.active;
    if (active !== undefined && !this.closed) {
      const probing = new Set<PoolTarget>();
      entry.probes = setInterval(() => {
        for (const target of entry.pool.targets) {
          if (probing.has(target)) continue;
          probing.add(target);
          void this.probe(entry, target)
            .catch((error: unknown) =>
              this.options.log.error({ err: error, route: entry.route }, "an upstream health probe failed unexpectedly"),
            )
            .finally(() => probing.delete(target));
        }
      }, active.intervalMs);
      entry.probes.unref();
    }
    return entry;
  }

  /**
   * What a route's pool lives as long as: its upstream, and for a route made through the API the list of what it may
   * reach, so that connections opened under a list a reload changed are not used again.
   */
  private fingerprint(route: CompiledRoute): string {
    if (route.definition.source !== "api") return route.pool.fingerprint;
    return `${route.pool.fingerprint}\u0000${JSON.stringify(this.options.apiUpstreams.allowance().entries)}`;
  }

  /** One probe of one target: GET its probe path, passed when it answers an expected status in time. */
  private async probe(entry: PoolEntry, target: PoolTarget): Promise<void> {
    const active = entry.pool.upstream.active;
    if (active === undefined) return;
    let passed: boolean;
    try {
      const answer = await (entry.dispatcher ?? this.client.dispatcher).request({
        origin: target.origin,
        path: active.path,
        method: "GET",
        headers: { "user-agent": "keygate-health-check" },
        headersTimeout: active.timeoutMs,
        bodyTimeout: active.timeoutMs,
        signal: AbortSignal.timeout(active.timeoutMs),
      });
      await answer.body.dump();
      const status = answer.statusCode;
      passed = active.statuses ? active.statuses.has(status) : status >= 200 && status < 400;
    } catch {
      passed = false;
    }
    // Stopped meanwhile: the verdict is no one's.
    if (entry.probes === undefined) return;
    if (entry.pool.probed(target, passed)) {
      this.options.log.warn(
        { route: entry.route, upstream: target.shown },
        passed ? "upstream target passes its health checks again" : "upstream target fails its health checks: taken out",
      );
    }
  }

  /** Stops a pool whose route went or changed; its connections close once their calls are done. */
  private stopInBackground(entry: PoolEntry): void {
    this.stop(entry).catch((error: unknown) =>
      this.options.log.warn({ err: error, route: entry.route }, "could not close the connections of a replaced upstream pool"),
    );
  }

  private async stop(entry: PoolEntry): Promise<void> {
    clearInterval(entry.probes);
    delete entry.probes;
    await entry.dispatcher?.close();
  }
}
