/**
 * Cached verification data must not outlive a change, on any keygate instance: a revoked key is refused
 * everywhere at once. Services call this after their write has been stored.
 */
export interface CacheInvalidator {
  /** One key changed (created, updated, deleted, its balance changed). */
  keyChanged(workspaceId: string, keyHash: string): Promise<void>;
  /** Many keys changed at once (keys.migrateKeys created them): as keyChanged for each, in a few messages. */
  keysChanged(workspaceId: string, keyHashes: readonly string[]): Promise<void>;
  /** Something many keys depend on changed (a role, a permission, an identity, an API). */
  workspaceChanged(workspaceId: string): Promise<void>;
  /** A root key was created or revoked. */
  rootKeyChanged(hash: string): Promise<void>;
}
