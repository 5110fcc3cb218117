import { LRUCache } from "lru-cache";
import type { Awaitable } from "../lib/awaitable.js";
import type { Clock } from "../lib/clock.js";

export interface SwrCacheOptions {
  /** Most entries kept; the least recently used go first. */
  max: number;
  /** An entry younger than this is served as is. */
  freshMs: number;
  /**
   * An entry younger than this (and older than freshMs) may still be served: while one background load refreshes
   * it ("stale-while-revalidate", the default), or only when a foreground reload fails ("stale-if-error").
   */
  staleMs: number;
  /**
   * "stale-if-error" bounds how old an answer can be by freshMs whenever the source answers, and keeps serving
   * the last known value while it does not (up to staleMs).
   */
  mode?: "stale-while-revalidate" | "stale-if-error";
  /** How long "absent" (null) is trusted. Absent entries are never served stale. */
  negativeMs: number;
  clock: Clock;
  /** A refresh failed (in the background, or in the foreground when a stale value was served instead). */
  onRefreshError?: (error: unknown, key: string) => void;
}

interface Entry<V> {
  value: V | null;
  freshUntil: number;
  staleUntil: number;
}

/**
 * Read-through cache with stale-while-revalidate (or stale-if-error). `null` means known absent (negative
 * caching). Concurrent misses of one key share a single load, which is given the value cached before (if any) so
 * it can revalidate cheaply. delete() also disowns a load in flight, so a load that started before an
 * invalidation can never put the old value back.
 */
export class SwrCache<V> {
  private readonly entries: LRUCache<string, Entry<V>>;
  private readonly loading = new Map<string, Promise<V | null>>();
  private readonly options: SwrCacheOptions;

  constructor(options: SwrCacheOptions) {
    this.options = options;
    this.entries = new LRUCache({ max: options.max });
  }

  /** The cached value at once while it may be served; a promise when it has to be loaded (or reloaded first). */
  get(key: string, load: (previous: V | null | undefined) => Promise<V | null>): Awaitable<V | null> {
    const entry = this.entries.get(key);
    if (entry) {
      const now = this.options.clock.now();
      if (now < entry.freshUntil) return entry.value;
      if (now < entry.staleUntil) {
        const stale = entry.value as V; // absent entries are never stale: their staleUntil is their freshUntil
        if (this.options.mode === "stale-if-error") {
          return this.load(key, load, stale).catch((error: unknown) => {
            this.options.onRefreshError?.(error, key);
            return stale;
          });
        }
        if (!this.loading.has(key)) {
          this.load(key, load, stale).catch((error: unknown) => this.options.onRefreshError?.(error, key));
        }
        return stale;
      }
    }
    return this.load(key, load, entry?.value);
  }

  /** The value while it is fresh (null: known absent), without loading; undefined when get() would have to load. */
  peek(key: string): V | null | undefined {
    const entry = this.entries.get(key);
    return entry && this.options.clock.now() < entry.freshUntil ? entry.value : undefined;
  }

  delete(key: string): void {
    this.entries.delete(key);
    this.loading.delete(key);
  }

  clear(): void {
    this.entries.clear();
    this.loading.clear();
  }

  get size(): number {
    return this.entries.size;
  }

  private load(key: string, load: (previous: V | null | undefined) => Promise<V | null>, previous: V | null | undefined): Promise<V | null> {
    const pending = this.loading.get(key);
    if (pending) return pending;
    const promise: Promise<V | null> = Promise.resolve()
      .then(() => load(previous))
      .then(
        (value) => {
          if (this.loading.get(key) === promise) {
            this.loading.delete(key);
            this.remember(key, value);
          }
          return value;
        },
        (error: unknown) => {
          if (this.loading.get(key) === promise) this.loading.delete(key);
          throw error;
        },
      );
    this.loading.set(key, promise);
    return promise;
  }

  private remember(key: string, value: V | null): void {
    const now = this.options.clock.now();
    if (value === null) {
      this.entries.set(key, { value, freshUntil: now + this.options.negativeMs, staleUntil: now + this.options.negativeMs });
    } else {
      this.entries.set(key, { value, freshUntil: now + this.options.freshMs, staleUntil: now + this.options.staleMs });
    }
  }
}
