import type { UpstreamBalance, UpstreamPoolRecord, UpstreamTlsRecord } from "../../storage/route-records.js";
import type { Problems } from "./problems.js";

/** One target of a route's upstream. */
export interface CompiledTarget {
  readonly url: URL;
  readonly weight: number;
}

/** Passive health: `failures` in a row eject a target for `cooldownMs`; a 5xx answer counts when `on5xx`. */
export interface PassiveHealth {
  readonly failures: number;
  readonly cooldownMs: number;
  readonly on5xx: boolean;
}

export interface ActiveHealth {
  readonly path: string;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly healthyThreshold: number;
  readonly unhealthyThreshold: number;
  /** undefined: 200 to 399. */
  readonly statuses: ReadonlySet<number> | undefined;
}

/** The TLS settings of an upstream's connections, the files read. */
export interface UpstreamTls {
  ca?: string;
  cert?: string;
  key?: string;
  servername?: string;
  rejectUnauthorized?: boolean;
}

/** A route's upstream ready to serve: one URL is a pool of one target without health checks or retries. */
export interface CompiledUpstream {
  /** Whether the route's upstream is a pool (an object), whose state is shown and measured. */
  readonly pooled: boolean;
  readonly targets: readonly CompiledTarget[];
  readonly balance: UpstreamBalance;
  /** undefined: targets are never ejected (a single URL). */
  readonly passive: PassiveHealth | undefined;
  readonly active: ActiveHealth | undefined;
  readonly retry: { readonly statuses: ReadonlySet<number>; readonly attempts: number };
  readonly tls: UpstreamTls | undefined;
  /** What the upstream was compiled from, files' contents included: its targets' state lives while this is the same. */
  readonly fingerprint: string;
}

/** Reads a TLS file of an upstream (PEM text); throws an Error whose message says what is wrong with it. */
export type TlsFileReader = (path: string, kind: "ca" | "cert" | "key") => string;

export const PASSIVE_DEFAULTS: PassiveHealth = { failures: 5, cooldownMs: 30_000, on5xx: false };
export const ACTIVE_DEFAULTS = { intervalMs: 10_000, timeoutMs: 2_000, healthyThreshold: 2, unhealthyThreshold: 3 };
const NO_RETRY = { statuses: new Set<number>(), attempts: 0 };

/**
 * Compiles a route's upstream, pushing each problem under `field` ("upstream", "routes[2].upstream"); undefined
 * when there was any. The schema has made sure each URL is http(s) with a host.
 */
export function compileUpstream(
  upstream: string | UpstreamPoolRecord,
  field: string,
  readTlsFile: TlsFileReader | undefined,
  problems: Problems,
): CompiledUpstream | undefined {
  const before = problems.length;
  if (typeof upstream === "string") {
    const url = parseUrl(upstream, field, problems);
    if (!url) return undefined;
    const targets = [{ url, weight: 1 }];
    return {
      pooled: false,
      targets,
      balance: "round-robin",
      passive: undefined,
      active: undefined,
      retry: NO_RETRY,
      tls: undefined,
      fingerprint: upstream,
    };
  }
  const targets: CompiledTarget[] = [];
  upstream.targets.forEach((target, index) => {
    const url = parseUrl(target.url, `${field}.targets[${index}].url`, problems);
    if (url) targets.push({ url, weight: target.weight ?? 1 });
  });
  const paths = new Set(targets.map(({ url }) => url.pathname.replace(/\/+$/, "")));
  if (paths.size > 1) problems.push({ at: `${field}.targets`, message: "every target must have the same path" });
  const urls = targets.map(({ url }) => url.href);
  if (new Set(urls).size !== urls.length) problems.push({ at: `${field}.targets`, message: "two targets share a URL" });
  const tls = upstream.tls ? compileTls(upstream.tls, `${field}.tls`, readTlsFile, problems) : undefined;
  const passive = upstream.health?.passive;
  const active = upstream.health?.active;
  inertSettings(upstream, field, problems);
  if (problems.length > before) return undefined;
  return {
    pooled: true,
    targets,
    balance: upstream.balance ?? "round-robin",
    passive: {
      failures: passive?.failures ?? PASSIVE_DEFAULTS.failures,
      cooldownMs: passive?.cooldownMs ?? PASSIVE_DEFAULTS.cooldownMs,
      on5xx: passive?.on5xx ?? PASSIVE_DEFAULTS.on5xx,
    },
    active: active && {
      path: active.path,
      intervalMs: active.intervalMs ?? ACTIVE_DEFAULTS.intervalMs,
      timeoutMs: active.timeoutMs ?? ACTIVE_DEFAULTS.timeoutMs,
      healthyThreshold: active.healthyThreshold ?? ACTIVE_DEFAULTS.healthyThreshold,
      unhealthyThreshold: active.unhealthyThreshold ?? ACTIVE_DEFAULTS.unhealthyThreshold,
      statuses: active.statuses ? new Set(active.statuses) : undefined,
    },
    retry: { statuses: new Set(upstream.retry?.statuses ?? []), attempts: upstream.retry?.attempts ?? 1 },
    tls,
    fingerprint: JSON.stringify([upstream, tls ?? null]),
  };
}

/**
 * Settings of a pool that would silently do nothing: a retry goes to a target not tried yet, so a pool of one target
 * never retries and attempts beyond its other targets are never made; a probe still waiting when the next is due
 * holds that one back, so a timeout set longer than the interval stretches the interval (the default timeout only
 * bounds a target that hangs).
 */
function inertSettings(upstream: UpstreamPoolRecord, field: string, problems: Problems): void {
  const others = upstream.targets.length - 1;
  const retry = upstream.retry;
  if (retry !== undefined && others === 0) {
    problems.push({ at: `${field}.retry`, message: "a retry goes to another target: a pool of one target is never retried (add targets)" });
  } else if (retry?.attempts !== undefined && retry.attempts > others) {
    problems.push({
      at: `${field}.retry.attempts`,
      message: `(${retry.attempts}) is more than the pool's other targets (${others}): a retry goes to a target not tried yet`,
    });
  }
  const active = upstream.health?.active;
  if (active?.timeoutMs !== undefined && active.timeoutMs > (active.intervalMs ?? ACTIVE_DEFAULTS.intervalMs)) {
    problems.push({
      at: `${field}.health.active.timeoutMs`,
      message: `(${active.timeoutMs}) must not be longer than health.active.intervalMs (${active.intervalMs ?? ACTIVE_DEFAULTS.intervalMs}): a probe still waiting holds the next one back`,
    });
  }
}

function parseUrl(text: string, at: string, problems: Problems): URL | undefined {
  try {
    const url = new URL(text);
    if (!url.search && !url.hash) return url;
    problems.push({ at, message: "must not have a query string or fragment" });
  } catch {
    problems.push({ at, message: `'${text}' is not a valid URL` });
  }
  return undefined;
}

function compileTls(tls: UpstreamTlsRecord, at: string, read: TlsFileReader | undefined, problems: Problems): UpstreamTls | undefined {
  const before = problems.length;
  const compiled: UpstreamTls = {};
  for (const kind of ["ca", "cert", "key"] as const) {
    const path = tls[kind];
    if (path === undefined) continue;
    if (!read) {
      problems.push({ at: `${at}.${kind}`, message: "TLS files cannot be read here" });
      continue;
    }
    try {
      compiled[kind] = read(path, kind);
    } catch (error) {
      problems.push({ at: `${at}.${kind}`, message: `'${path}': ${(error as Error).message}` });
    }
  }
  if ((tls.cert === undefined) !== (tls.key === undefined)) problems.push({ at, message: "cert and key go together" });
  if (tls.servername !== undefined) compiled.servername = tls.servername;
  if (tls.rejectUnauthorized !== undefined) compiled.rejectUnauthorized = tls.rejectUnauthorized;
  return problems.length > before ? undefined : compiled;
}
