import type { CacheStats } from "./swr-cache.js";

/** `cache.maxBytes` by default: fits a sidecar given 256 MB. */
export const DEFAULT_CACHE_MAX_BYTES = 64 * 1024 * 1024;

/**
 * How `cache.maxBytes` is shared among the in-process caches (docs/operations.md#memory). Key views take most: a
 * sidecar's memory goes to the keys it verifies. Absences (hashes known not to be a key) have their own share, so
 * a flood of unknown keys cannot push known ones out.
 */
export const CACHE_SHARES = {
  /** Verification's key views. */
  keys: 0.7,
  /** Hashes known to be no key (negative entries), for CACHE_TIMES.unknownKeyMs. */
  unknown_keys: 0.1,
  /** Authenticated root keys. */
  root_keys: 0.04,
  /** Root-key hashes known to be no root key. */
  unknown_root_keys: 0.01,
  /** Rate limit namespaces with their overrides. */
  namespaces: 0.1,
  /** Rate limit namespace names → ids. */
  namespace_names: 0.05,
} as const;

export type CachePart = keyof typeof CACHE_SHARES;

/** Each cache's part of `maxBytes`, in whole bytes. */
export type CacheBudget = Record<CachePart, number>;

export function cacheBudget(maxBytes: number): CacheBudget {
  const budget = {} as CacheBudget;
  for (const [part, share] of Object.entries(CACHE_SHARES)) budget[part as CachePart] = Math.floor(maxBytes * share);
  return budget;
}

/** One cache's state for the metrics. */
export interface CacheSample extends CacheStats {
  cache: CachePart;
}
