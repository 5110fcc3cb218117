import type { RootKeyStore } from "../storage/interfaces.js";
import type { RootKeyRecord } from "../storage/records.js";
import type { SwrCache } from "./swr-cache.js";

/**
 * Root keys are read on every management request; this keeps them in process. Changes reach it through
 * `invalidate`, fed by the invalidation bus (so a revocation on any instance, or by the CLI, applies everywhere).
 */
export class CachedRootKeyStore implements RootKeyStore {
  private readonly inner: RootKeyStore;
  private readonly cache: SwrCache<RootKeyRecord>;

  constructor(inner: RootKeyStore, cache: SwrCache<RootKeyRecord>) {
    this.inner = inner;
    this.cache = cache;
  }

  async findByHash(hash: string): Promise<RootKeyRecord | null> {
    return this.cache.get(hash, () => this.inner.findByHash(hash));
  }

  create(record: RootKeyRecord): Promise<boolean> {
    return this.inner.create(record);
  }

  list(workspaceId?: string): Promise<RootKeyRecord[]> {
    return this.inner.list(workspaceId);
  }

  revoke(id: string, at: number): Promise<RootKeyRecord | null> {
    return this.inner.revoke(id, at);
  }

  invalidate(hash: string): void {
    this.cache.delete(hash);
  }

  /** Invalidations may have been missed: revalidate every cached root key before trusting it (SwrCache.revalidateAll). */
  revalidateAll(): void {
    this.cache.revalidateAll();
  }
}

/** A root key record's heap size, estimated: the record, its strings and its permissions. */
export function rootKeyBytes(record: RootKeyRecord): number {
  let bytes = 160 + record.id.length + record.hash.length + record.workspaceId.length + (record.name?.length ?? 0);
  for (const permission of record.permissions) bytes += 24 + permission.length;
  return bytes;
}
