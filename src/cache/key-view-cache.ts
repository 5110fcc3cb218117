import type { CacheLookup } from "../domain/observer.js";
import { type KeyView, keyViewBytes } from "../domain/verification/key-view.js";
import type { Clock } from "../lib/clock.js";
import { defined } from "../lib/defined.js";
import type { InvalidationMessage } from "./invalidation-bus.js";
import { type CacheStats, SwrCache } from "./swr-cache.js";

export interface KeyViewCacheOptions {
  /** Bytes the views may take (cache-budget.ts: `keys`). */
  maxBytes: number;
  /** Bytes the hashes known to be no key may take (`unknown_keys`). */
  absentMaxBytes: number;
  freshMs: number;
  staleMs: number;
  /** How long an unknown hash is remembered as unknown (creating a key invalidates it at once anyway). */
  negativeMs: number;
  clock: Clock;
  onRefreshError?: (error: unknown) => void;
  /** Which failed reloads still let the last known view be served (SwrCacheOptions.keepServingOn). */
  keepServingOn?: (error: unknown) => boolean;
  /** SwrCacheOptions.onLookup. */
  onLookup?: (result: CacheLookup) => void;
}

/**
 * Verification's in-process cache of key views by workspace and hash, in front of the stores. A changed key is
 * evicted; a change that touches many keys of a workspace moves the workspace to a new epoch, which makes all
 * of its entries unreachable at once (they then age out of the LRU). After a gap in which invalidations may have
 * been missed ("everything"), every view is revalidated before it is trusted, and still served while the store
 * cannot answer: a cached key with nothing to count keeps verifying without Redis.
 */
export class KeyViewCache {
  private readonly cache: SwrCache<KeyView>;
  private readonly epochs = new Map<string, number>();

  constructor(options: KeyViewCacheOptions) {
    this.cache = new SwrCache<KeyView>({
      maxBytes: options.maxBytes,
      absentMaxBytes: options.absentMaxBytes,
      sizeOf: keyViewBytes,
      freshMs: options.freshMs,
      staleMs: options.staleMs,
      negativeMs: options.negativeMs,
      clock: options.clock,
      ...defined({ onRefreshError: options.onRefreshError, keepServingOn: options.keepServingOn, onLookup: options.onLookup }),
    });
  }

  async get(workspaceId: string, hash: string, load: () => Promise<KeyView | null>): Promise<KeyView | null> {
    return this.cache.get(this.cacheKey(workspaceId, hash), load);
  }

  invalidate(message: InvalidationMessage): void {
    if (message.kind === "key") this.cache.delete(this.cacheKey(message.workspaceId, message.hash));
    else if (message.kind === "keys") for (const hash of message.hashes) this.cache.delete(this.cacheKey(message.workspaceId, hash));
    else if (message.kind === "workspace") this.epochs.set(message.workspaceId, (this.epochs.get(message.workspaceId) ?? 0) + 1);
    else if (message.kind === "everything") this.cache.revalidateAll();
  }

  /** The views' part and the unknown keys' part, for the metrics. */
  stats(): { keys: CacheStats; unknownKeys: CacheStats } {
    return { keys: this.cache.stats(), unknownKeys: this.cache.absentStats() };
  }

  private cacheKey(workspaceId: string, hash: string): string {
    return `${workspaceId}\u0000${this.epochs.get(workspaceId) ?? 0}\u0000${hash}`;
  }
}
