import type { RatelimitNamespaceRecord } from "../../storage/records.js";
import type { OverrideMatcher } from "./override-matcher.js";

/** A namespace as the rate limiter needs it on every call: the record and its overrides, ready to match. */
export interface ResolvedNamespace {
  namespace: RatelimitNamespaceRecord;
  overrides: OverrideMatcher;
  /** Changes whenever the overrides change (RatelimitNamespaceStore.namespaceState). */
  overridesVersion: string;
}

/**
 * How the rate limiter finds namespaces on its hot path. The implementation (cache/ratelimit-namespace-directory.ts)
 * keeps them in process and guarantees that what it answers is at most NAMESPACE_FRESH_MS old whenever the store
 * answers, so an override set or deleted on any instance applies on every instance within that time.
 */
export interface NamespaceDirectory {
  /**
   * The namespace with this `rlns_` id or, failing that, this name, in the workspace, deleted or not; null when
   * there is none. Throws StoreUnavailableError when the store cannot answer and nothing is known.
   */
  find(workspaceId: string, nameOrId: string): Promise<ResolvedNamespace | null>;
  /** Drops what this instance knows of the namespace, after changing it here. */
  forget(workspaceId: string, namespaceId: string, name: string): void;
  /**
   * Trusts nothing it knows until the store confirms it again, e.g. when the store comes back after an outage and
   * may have lost data; while the store cannot answer, what it knew keeps serving.
   */
  revalidateAll(): void;
}

/**
 * How old the namespaces and overrides the rate limiter decides with may be, while the store answers. Half the
 * promised 1 s, so that an override change applies everywhere within 1 s including the time to read it.
 */
export const NAMESPACE_FRESH_MS = 500;
