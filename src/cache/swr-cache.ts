import { LRUCache } from "lru-cache";
import type { CacheLookup } from "../domain/observer.js";
import type { Clock } from "../lib/clock.js";

/**
 * A value now, or a promise of it: get() answers a fresh entry without a promise and may throw at once. The
 * caches built on SwrCache (KeyViewCache, CachedRootKeyStore) turn this into a plain promise for their callers.
 */
type Awaitable<T> = T | Promise<T>;

export interface SwrCacheOptions<V> {
  /**
   * Bytes the cached values may take, as `sizeOf` estimates them (lru-cache's own size accounting); the least
   * recently used go first. A value estimated above it is not cached.
   */
  maxBytes: number;
  /**
   * Bytes the known absences may take. They are an LRU of their own, so a flood of unknown keys never pushes a
   * known one out; 0 (or `negativeMs` 0) keeps none.
   */
  absentMaxBytes: number;
  /** What a value costs the heap, estimated in bytes (its cache key and the entry's own cost are added). */
  sizeOf: (value: V) => number;
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
  /**
   * Which failed foreground reloads still let the last known value be served (stale-if-error, and an entry
   * awaiting revalidation after revalidateAll). Default: every failure. Give "the store is unavailable" to have
   * any other failure (a bug) reach the caller.
   */
  keepServingOn?: (error: unknown) => boolean;
  /** Told how each get() was answered: from a fresh entry, from a stale one, or by loading (metrics). */
  onLookup?: (result: CacheLookup) => void;
}

/** What a cache holds, for the metrics: entries, their estimated bytes, and how many were evicted to keep the budget. */
export interface CacheStats {
  entries: number;
  bytes: number;
  maxBytes: number;
  evictions: number;
}

/**
 * What an entry costs besides its value and key, estimated: the entry object and lru-cache's bookkeeping (its
 * key map, lists and size arrays). bench/key-view-memory.ts compares the estimates with the heap.
 */
const ENTRY_BYTES = 160;

interface Entry<V> {
  value: V | null;
  freshUntil: number;
  staleUntil: number;
  /** The revalidateAll() round the value was loaded in; an older one must be confirmed before it is trusted. */
  round: number;
}

/**
 * Read-through cache with stale-while-revalidate (or stale-if-error). `null` means known absent (negative
 * caching). Concurrent misses of one key share a single load, which is given the value cached before (if any) so
 * it can revalidate cheaply. delete() also disowns a load in flight, so a load that started before an
 * invalidation can never put the old value back. revalidateAll() is the answer to "invalidations may have been
 * missed": every value is reloaded before it is trusted again, yet still served while the reload fails.
 */
export class SwrCache<V> {
  private readonly entries: LRUCache<string, Entry<V>>;
  /** Known absences, when kept (absentMaxBytes and negativeMs above 0). */
  private readonly absent: LRUCache<string, Entry<V>> | undefined;
  private readonly loading = new Map<string, Promise<V | null>>();
  private readonly options: SwrCacheOptions<V>;
  private round = 0;
  private evicted = 0;
  private absentEvicted = 0;

  constructor(options: SwrCacheOptions<V>) {
    this.options = options;
    const sizeOf = options.sizeOf;
    this.entries = new LRUCache<string, Entry<V>>({
      maxSize: options.maxBytes,
      sizeCalculation: (entry, key) => ENTRY_BYTES + key.length + sizeOf(entry.value as V),
      dispose: (_entry, _key, reason) => {
        if (reason === "evict") this.evicted++;
      },
    });
    if (options.absentMaxBytes > 0 && options.negativeMs > 0) {
      this.absent = new LRUCache<string, Entry<V>>({
        maxSize: options.absentMaxBytes,
        sizeCalculation: (_entry, key) => ENTRY_BYTES + key.length,
        dispose: (_entry, _key, reason) => {
          if (reason === "evict") this.absentEvicted++;
        },
      });
    }
  }

  /** The cached value at once while it may be served; a promise when it has to be loaded (or reloaded first). */
  get(key: string, load: (previous: V | null | undefined) => Promise<V | null>): Awaitable<V | null> {
    const entry = this.entries.get(key) ?? this.absent?.get(key);
    const onLookup = this.options.onLookup;
    if (entry) {
      const now = this.options.clock.now();
      const confirmed = entry.round === this.round;
      if (confirmed && now < entry.freshUntil) {
        onLookup?.("hit");
        return entry.value;
      }
      if (now < entry.staleUntil && entry.value !== null) {
        // Absent entries are never served stale (their staleUntil is their freshUntil, and unconfirmed ones reload).
        const stale = entry.value;
        if (!confirmed || this.options.mode === "stale-if-error") {
          onLookup?.("miss");
          return this.reloadOrServe(key, load, stale);
        }
        if (!this.loading.has(key)) {
          this.load(key, load, stale).catch((error: unknown) => this.options.onRefreshError?.(error, key));
        }
        onLookup?.("stale");
        return stale;
      }
    }
    onLookup?.("miss");
    return this.load(key, load, entry?.value);
  }

  /** The value while it is fresh (null: known absent), without loading; undefined when get() would have to load. */
  peek(key: string): V | null | undefined {
    const entry = this.entries.get(key) ?? this.absent?.get(key);
    return entry && entry.round === this.round && this.options.clock.now() < entry.freshUntil ? entry.value : undefined;
  }

  delete(key: string): void {
    this.entries.delete(key);
    this.absent?.delete(key);
    this.loading.delete(key);
  }

  /**
   * Nothing cached so far is trusted without asking the source again: the next get() of each key reloads before
   * answering, and serves the value it had (while within staleMs) only when that reload fails in a way
   * `keepServingOn` accepts. Known absences are reloaded too, never served on failure. Loads in flight are disowned.
   */
  revalidateAll(): void {
    this.round++;
    this.loading.clear();
  }

  /** Entries holding a value. */
  get size(): number {
    return this.entries.size;
  }

  /** The values' part of the cache. */
  stats(): CacheStats {
    return { entries: this.entries.size, bytes: this.entries.calculatedSize, maxBytes: this.options.maxBytes, evictions: this.evicted };
  }

  /** The known absences' part (all zero when none are kept). */
  absentStats(): CacheStats {
    const absent = this.absent;
    return absent
      ? { entries: absent.size, bytes: absent.calculatedSize, maxBytes: this.options.absentMaxBytes, evictions: this.absentEvicted }
      : { entries: 0, bytes: 0, maxBytes: 0, evictions: 0 };
  }

  /** Reloads before answering; when that fails as keepServingOn allows, the last known value instead. */
  private reloadOrServe(key: string, load: (previous: V | null | undefined) => Promise<V | null>, last: V): Promise<V | null> {
    return this.load(key, load, last).catch((error: unknown) => {
      if (!(this.options.keepServingOn?.(error) ?? true)) throw error;
      this.options.onRefreshError?.(error, key);
      return last;
    });
  }

  private load(
    key: string,
    load: (previous: V | null | undefined) => Promise<V | null>,
    previous: V | null | undefined,
  ): Promise<V | null> {
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
    const round = this.round;
    if (value === null) {
      this.entries.delete(key);
      const freshUntil = now + this.options.negativeMs;
      this.absent?.set(key, { value, freshUntil, staleUntil: freshUntil, round });
    } else {
      this.absent?.delete(key);
      this.entries.set(key, { value, freshUntil: now + this.options.freshMs, staleUntil: now + this.options.staleMs, round });
    }
  }
}
