import type { EncryptedSecret } from "../lib/vault.js";
/**
 * What the stores keep. Times are unix milliseconds. Optional fields are absent when unset (never null), so a
 * record read back from Redis equals the record written to memory.
 */

export interface RootKeyRecord {
  id: string;
  /** base64 SHA-256 of the plaintext; the plaintext is never stored. */
  hash: string;
  workspaceId: string;
  /** `resource.<id|*>.action` tuples, or `*` for everything. */
  permissions: string[];
  name?: string;
  createdAt: number;
  expires?: number;
  revokedAt?: number;
}

/**
 * A dashboard session (domain/dashboard/session-service.ts). `id` is the SHA-256 of the cookie's value, so the
 * store never holds a usable session id; the root key is held by hash and authenticated again on every use.
 */
export interface DashboardSessionRecord {
  id: string;
  rootKeyHash: string;
  workspaceId: string;
  /** Sent back in a header with every state-changing request (CSRF). */
  csrfToken: string;
  createdAt: number;
  lastSeenAt: number;
}

export interface ApiRecord {
  id: string;
  workspaceId: string;
  name: string;
  /** The API's key space (`ks_…`); verification events and analytics refer to keys by it. */
  keySpaceId: string;
  createdAt: number;
  deleteProtection: boolean;
  /**
   * Addresses and CIDR ranges (IPv4, IPv6) keys of this API may be verified from; absent: from anywhere. A
   * verification from elsewhere is FORBIDDEN.
   */
  ipAllowlist?: string[];
  deletedAt?: number;
}

/** A named rate limit configured on a key or an identity. */
export interface RatelimitConfig {
  /** `rl_…`; kept when an update replaces limits by name. */
  id: string;
  name: string;
  limit: number;
  durationMs: number;
  /** Applied to every verification without being asked for. */
  autoApply: boolean;
}

export interface KeyRecord {
  id: string;
  workspaceId: string;
  apiId: string;
  keySpaceId: string;
  /**
   * base64 SHA-256 of the full key; the key itself is never stored in plaintext. While `pendingMigrationId` is set,
   * the hash of the system the key was imported from instead (domain/keys/key-migrations.ts).
   */
  hash: string;
  /** Shown in listings so people can recognise a key: the prefix and the first characters ("" for an imported key until it is first verified). */
  start: string;
  /** Kept so that rerollKey makes a key of the same shape and strength. */
  prefix?: string;
  byteLength: number;
  name?: string;
  identityId?: string;
  meta?: Record<string, unknown>;
  expires?: number;
  enabled: boolean;
  /** Direct permissions by id; a deleted permission simply no longer resolves. */
  permissionIds: string[];
  roleIds: string[];
  ratelimits: RatelimitConfig[];
  encrypted?: EncryptedSecret;
  /**
   * Set on a key imported by keys.migrateKeys under an old system's hash that keygate cannot verify directly: only
   * keys.verifyKey with this migration id finds it, and its first verification there rewrites it to keygate's hash.
   */
  pendingMigrationId?: string;
  createdAt: number;
  updatedAt?: number;
  deletedAt?: number;
}

export interface CreditRefill {
  interval: "daily" | "monthly";
  amount: number;
  /** Day of the month for monthly refills (clamped to the month's last day). */
  refillDay?: number;
}

/**
 * The usage balance of a key or an identity with limited credits. A key without one spends its identity's, when
 * that has one; else it is unlimited.
 */
export interface CreditRecord {
  remaining: number;
  refill?: CreditRefill;
  /** When the balance was last set or refilled; refills due after this are applied lazily. */
  lastRefillAt: number;
  /** A verification that takes the balance from above this to at or below it posts a `*.credits.low` notice. */
  lowThreshold?: number;
}

export interface PermissionRecord {
  id: string;
  workspaceId: string;
  name: string;
  /** Unique in the workspace (case-sensitive): the string keys hold and queries name. */
  slug: string;
  description?: string;
  createdAt: number;
}

export interface RoleRecord {
  id: string;
  workspaceId: string;
  /** Unique in the workspace regardless of case. */
  name: string;
  description?: string;
  permissionIds: string[];
  createdAt: number;
}

export interface IdentityRecord {
  id: string;
  workspaceId: string;
  /** Unique among the workspace's live identities; free again once the identity is deleted. */
  externalId: string;
  meta?: Record<string, unknown>;
  /** Shared by every key of the identity. */
  ratelimits: RatelimitConfig[];
  createdAt: number;
  deletedAt?: number;
}
/** A rate limit namespace (`rlns_…`): a name within a workspace that `ratelimit.limit` counts under. */
export interface RatelimitNamespaceRecord {
  id: string;
  workspaceId: string;
  /** Unique within the workspace, also after deletion (a deleted namespace's name answers 410). */
  name: string;
  createdAt: number;
  deletedAt?: number;
}

/** A per-identifier override (`rlor_…`) of the limit and duration a namespace's callers ask for. */
export interface RatelimitOverrideRecord {
  id: string;
  workspaceId: string;
  namespaceId: string;
  /** An exact identifier, or a pattern in which `*` stands for any run of characters. Unique per namespace. */
  identifier: string;
  /** 0 blocks every request. */
  limit: number;
  durationMs: number;
  createdAt: number;
}
