import type { CacheLookup } from "../domain/observer.js";
import { NAMESPACE_FRESH_MS, type NamespaceDirectory, type ResolvedNamespace } from "../domain/ratelimit/namespace-directory.js";
import { OverrideMatcher } from "../domain/ratelimit/override-matcher.js";
import type { Clock } from "../lib/clock.js";
import type { RatelimitNamespaceStore } from "../storage/interfaces.js";
import { isStoreUnavailable } from "../storage/unavailable.js";
import { type CacheBudget, cacheBudget, DEFAULT_CACHE_MAX_BYTES } from "./cache-budget.js";
import { type CacheStats, SwrCache } from "./swr-cache.js";

/** Ages of the two caches; see CachedNamespaceDirectory. Their sizes come from the cache budget. */
export const NAMESPACE_CACHE = {
  freshMs: NAMESPACE_FRESH_MS,
  /** While the store does not answer (Redis down), the last known namespace keeps serving for this long. */
  staleIfErrorMs: 24 * 60 * 60 * 1_000,
  /** A name never changes its id (there is no rename, and deletion is soft), so the mapping is kept long. */
  nameFreshMs: 60 * 60 * 1_000,
} as const;

/**
 * Namespaces with their overrides, in process. Two caches, both "stale-if-error":
 * - name → id, kept an hour (names do not move); unknown names are not cached, so a namespace created on another
 *   instance is found at once;
 * - id → namespace and overrides, fresh for NAMESPACE_FRESH_MS. Revalidation is one read of the namespace and
 *   its overrides' version token; the overrides themselves are reloaded only when the token changed.
 * When the store cannot answer, the last known state is used (for up to a day), so the rate limiter keeps
 * knowing its namespaces and overrides through a Redis outage.
 */
export class CachedNamespaceDirectory implements NamespaceDirectory {
  private readonly store: RatelimitNamespaceStore;
  private readonly ids: SwrCache<string>;
  private readonly namespaces: SwrCache<ResolvedNamespace>;
  private readonly onLookup: ((result: CacheLookup) => void) | undefined;

  /**
   * `onLookup` is told whether each find() was answered from memory (hit) or had to ask the store (miss); `budget`
   * gives the two caches their bytes (cache-budget.ts: `namespaces`, `namespace_names`).
   */
  constructor(
    store: RatelimitNamespaceStore,
    clock: Clock,
    onLookup?: (result: CacheLookup) => void,
    budget: Pick<CacheBudget, "namespaces" | "namespace_names"> = cacheBudget(DEFAULT_CACHE_MAX_BYTES),
  ) {
    this.store = store;
    this.onLookup = onLookup;
    this.ids = staleIfErrorCache(NAMESPACE_CACHE.nameFreshMs, clock, budget.namespace_names, nameBytes);
    this.namespaces = staleIfErrorCache(NAMESPACE_CACHE.freshMs, clock, budget.namespaces, namespaceBytes);
  }

  /** The namespaces' part and the names' part, for the metrics. */
  stats(): { namespaces: CacheStats; names: CacheStats } {
    return { namespaces: this.namespaces.stats(), names: this.ids.stats() };
  }

  find(workspaceId: string, nameOrId: string): Promise<ResolvedNamespace | null> {
    // The usual case, the name's id and the namespace both fresh in memory, waits for nothing.
    const id = nameOrId.startsWith("rlns_") ? nameOrId : this.ids.peek(key(workspaceId, nameOrId));
    const known = id ? this.namespaces.peek(key(workspaceId, id)) : undefined;
    this.onLookup?.(known ? "hit" : "miss");
    return known ? Promise.resolve(known) : this.load(workspaceId, nameOrId);
  }

  private async load(workspaceId: string, nameOrId: string): Promise<ResolvedNamespace | null> {
    if (nameOrId.startsWith("rlns_")) {
      const byId = await this.byId(workspaceId, nameOrId);
      if (byId) return byId;
    }
    const nameKey = key(workspaceId, nameOrId);
    const loadId = async () => (await this.store.findNamespaceByName(workspaceId, nameOrId))?.id ?? null;
    const id = await this.ids.get(nameKey, loadId);
    if (id === null) return null;
    const namespace = await this.byId(workspaceId, id);
    if (namespace) return namespace;
    // The id this name had is gone: the store lost its data (a Redis restarted without persistence). Ask afresh.
    this.ids.delete(nameKey);
    const current = await this.ids.get(nameKey, loadId);
    return current === null || current === id ? null : this.byId(workspaceId, current);
  }

  forget(workspaceId: string, namespaceId: string, name: string): void {
    this.namespaces.delete(key(workspaceId, namespaceId));
    this.ids.delete(key(workspaceId, name));
  }

  revalidateAll(): void {
    this.namespaces.revalidateAll();
    this.ids.revalidateAll();
  }

  private async byId(workspaceId: string, namespaceId: string): Promise<ResolvedNamespace | null> {
    return this.namespaces.get(key(workspaceId, namespaceId), async (previous) => {
      const state = await this.store.namespaceState(workspaceId, namespaceId);
      if (!state) return null;
      if (previous && previous.overridesVersion === state.overridesVersion) {
        return { namespace: state.namespace, overrides: previous.overrides, overridesVersion: state.overridesVersion };
      }
      const overrides = await this.store.allOverrides(workspaceId, namespaceId);
      return { namespace: state.namespace, overrides: new OverrideMatcher(overrides), overridesVersion: state.overridesVersion };
    });
  }
}

function key(workspaceId: string, nameOrId: string): string {
  return `${workspaceId}\u0000${nameOrId}`;
}

/** One of the directory's caches: fresh for `freshMs`, then served for NAMESPACE_CACHE.staleIfErrorMs only while the store cannot answer. */
function staleIfErrorCache<V>(freshMs: number, clock: Clock, maxBytes: number, sizeOf: (value: V) => number): SwrCache<V> {
  // Unknown names and ids are not remembered: a namespace created on another instance is found at once.
  return new SwrCache<V>({
    maxBytes,
    absentMaxBytes: 0,
    sizeOf,
    freshMs,
    staleMs: freshMs + NAMESPACE_CACHE.staleIfErrorMs,
    negativeMs: 0,
    mode: "stale-if-error",
    keepServingOn: isStoreUnavailable,
    clock,
  });
}

/** An id (`rlns_…`) as a string on the heap. */
function nameBytes(id: string): number {
  return 24 + id.length;
}

/** A namespace, its record and its overrides matcher, estimated (each override: its record and its place in the matcher). */
function namespaceBytes(resolved: ResolvedNamespace): number {
  const namespace = resolved.namespace;
  return 300 + namespace.id.length + namespace.name.length + resolved.overrides.size * 240;
}
