import type { AuditOutbox } from "./audit-outbox-interfaces.js";
import type { Broadcast, StoreHealth } from "./connection-interfaces.js";
import type { RatelimitCounterStore } from "./counter-interfaces.js";
import type { PortalSessionStore, PortalStore } from "./portal-interfaces.js";
import type {
  ApiRecord,
  CreditRecord,
  DashboardSessionRecord,
  IdentityRecord,
  KeyRecord,
  PermissionRecord,
  RatelimitNamespaceRecord,
  RatelimitOverrideRecord,
  RoleRecord,
  RootKeyRecord,
} from "./records.js";
import type { RouteStore } from "./route-interfaces.js";
import type { UsageReportStore } from "./usage-report-interfaces.js";
import type { WebhookOutbox, WebhookStore } from "./webhook-interfaces.js";

/**
 * One interface per kind of record. Each has an in-memory and a Redis implementation, and both pass the same
 * contract suite (test/storage/contract.ts). Methods that write several things do so atomically.
 */

export interface RootKeyStore {
  /** The root key with this hash, revoked or not; null when there is none. */
  findByHash(hash: string): Promise<RootKeyRecord | null>;
  /** Stores a new root key. Returns false (and changes nothing) when one with the same id or hash exists. */
  create(record: RootKeyRecord): Promise<boolean>;
  /** Every stored root key, optionally of one workspace, ordered by id. */
  list(workspaceId?: string): Promise<RootKeyRecord[]>;
  /** Marks the key revoked at `at`. Returns the updated record, or null when there is no live key with this id. */
  revoke(id: string, at: number): Promise<RootKeyRecord | null>;
}

/** Dashboard sessions; each one disappears by itself `ttlMs` after it was last written. */
export interface DashboardSessionStore {
  /** Stores a new session. Returns false (and changes nothing) when one with this id exists. */
  create(session: DashboardSessionRecord, ttlMs: number): Promise<boolean>;
  /** The live session with this id, or null. */
  get(id: string): Promise<DashboardSessionRecord | null>;
  /** Records a use and sets a new time to live; does nothing when the session is gone (never brings one back). */
  touch(id: string, lastSeenAt: number, ttlMs: number): Promise<void>;
  delete(id: string): Promise<void>;
}

export interface ApiStore {
  /** Stores a new API. Returns false (and changes nothing) when an API with this id exists in any workspace. */
  create(api: ApiRecord): Promise<boolean>;
  /** The API with this id in this workspace, deleted or not; null when absent or in another workspace. */
  get(workspaceId: string, apiId: string): Promise<ApiRecord | null>;
  /**
   * The workspace's APIs, deleted ones included, ordered by id (keygate.listApis). On Redis, APIs created before
   * keygate indexed them per workspace are found once, on the workspace's first list.
   */
  list(workspaceId: string): Promise<ApiRecord[]>;
  /** Which workspace owns an API id (the gateway knows an API id before it knows a workspace). */
  workspaceOf(apiId: string): Promise<string | null>;
  /** Soft-deletes a live API. Returns the deleted record, or null when it was absent or already deleted. */
  markDeleted(workspaceId: string, apiId: string, at: number): Promise<ApiRecord | null>;
  /** Replaces a live API's IP allowlist (null removes it). Returns the updated record; null when absent or deleted. */
  setIpAllowlist(workspaceId: string, apiId: string, ipAllowlist: readonly string[] | null): Promise<ApiRecord | null>;
  /**
   * The API whose key space is `keySpaceId` in this workspace, deleted or not; null when no API of this workspace
   * has it. Analytics rows name key spaces, and permissions name APIs.
   */
  findByKeySpace(workspaceId: string, keySpaceId: string): Promise<ApiRecord | null>;
}

/** Usage of one workspace's analytics query quota in one fixed window. */
export interface QuotaUsage {
  queries: number;
  executionMs: number;
}

/**
 * Per-workspace analytics query quota in fixed windows (`windowStart` is the window's start, unix ms). Shared by
 * every instance when it lives in Redis.
 */
export interface AnalyticsQuotaStore {
  /**
   * Counts one query in the window unless the window already holds `limits.queries` queries or `limits.executionMs`
   * of execution time; atomically. Returns whether it was counted and the usage afterwards.
   */
  acquire(workspaceId: string, windowStart: number, windowMs: number, limits: QuotaUsage): Promise<{ allowed: boolean; usage: QuotaUsage }>;
  /** Adds the execution time of a finished query to the window's usage. */
  addExecutionMs(workspaceId: string, windowStart: number, windowMs: number, ms: number): Promise<void>;
}

/** A keyset page request: items with id >= cursor, in id order. */
export interface PageRequest {
  cursor?: string;
  limit: number;
}

/** `nextCursor` is the id of the first item of the next page (inclusive), absent on the last page. */
export interface Page<T> {
  items: T[];
  nextCursor?: string;
}

/** What a change function decides: the new state to write (undefined fields are left as they are), and a result. */
export interface KeyChange<R> {
  key?: KeyRecord;
  /** null removes the credit balance (unlimited); undefined leaves it. */
  credits?: CreditRecord | null;
  result: R;
}

export interface KeyStore {
  /** Stores a key with its credit balance (null: unlimited). False when the id or hash exists already. */
  create(key: KeyRecord, credits: CreditRecord | null): Promise<boolean>;
  /** The key with this id in the workspace, soft-deleted ones included; null when absent. */
  get(workspaceId: string, keyId: string): Promise<KeyRecord | null>;
  /** The key with this hash in the workspace, soft-deleted ones included. */
  findByHash(workspaceId: string, hash: string): Promise<KeyRecord | null>;
  getCredits(workspaceId: string, keyId: string): Promise<CreditRecord | null>;
  /** Credit balances of several keys, by key id (keys without one are absent from the map). */
  getCreditsMany(workspaceId: string, keyIds: readonly string[]): Promise<Map<string, CreditRecord>>;
  /**
   * Changes a key and its credits together, atomically: `change` sees the current state and says what to write.
   * It may run more than once when another writer changes the key at the same time. Null when the key is absent.
   */
  update<R>(workspaceId: string, keyId: string, change: (key: KeyRecord, credits: CreditRecord | null) => KeyChange<R>): Promise<R | null>;
  /**
   * Gives `amount` credits back to the key's balance in one atomic step, as a spend takes them: the refills due at
   * `now` (unix ms) are applied first, then `amount` is added. Never retried and never lost to other writers. A
   * key without a balance (unlimited, or removed) is left alone and null is returned; else the balance afterwards.
   */
  refundCredits(workspaceId: string, keyId: string, amount: number, now: number): Promise<number | null>;
  /**
   * Moves a key imported under an old system's hash to keygate's own, atomically: when the key is pending on
   * `migrationId`, its `hash` and `start` become the ones given, `pendingMigrationId` goes, `updatedAt` is `at`, and
   * the hash index follows (the old hash no longer finds it). Returns the rewritten key; null, with nothing
   * written, when the key is absent, not pending on that migration, or another key holds `hash`.
   */
  completeMigration(
    workspaceId: string,
    keyId: string,
    migrationId: string,
    hash: string,
    start: string,
    at: number,
  ): Promise<KeyRecord | null>;
  /** Live keys of an API (optionally of one identity), by id. */
  list(workspaceId: string, apiId: string, page: PageRequest & { identityId?: string }): Promise<Page<KeyRecord>>;
  /** Removes a key, its credits and its indexes for good. False when absent. */
  remove(workspaceId: string, keyId: string): Promise<boolean>;
  /**
   * Moves every key kept in an earlier storage form into the current one (`keygate keys compact`), telling
   * `progress` how many have moved so far; returns how many moved. Keys read the same before and after; nothing
   * is lost when it stops half-way, and running it again goes on where it stopped.
   */
  upgradeStorage(progress?: (moved: number) => void): Promise<number>;
}

export interface PermissionStore {
  /** False (nothing written) when the slug is taken in the workspace. */
  create(permission: PermissionRecord): Promise<boolean>;
  get(workspaceId: string, id: string): Promise<PermissionRecord | null>;
  findBySlug(workspaceId: string, slug: string): Promise<PermissionRecord | null>;
  /** The permissions with these ids, in the order given; ids that do not resolve are skipped. */
  getMany(workspaceId: string, ids: readonly string[]): Promise<PermissionRecord[]>;
  /** Permissions by slug; slugs that do not exist are absent from the map. */
  findManyBySlugs(workspaceId: string, slugs: readonly string[]): Promise<Map<string, PermissionRecord>>;
  /** By id; `search` keeps those whose name or slug contains it, ignoring case. */
  list(workspaceId: string, page: PageRequest & { search?: string }): Promise<Page<PermissionRecord>>;
  /** False when absent. */
  delete(workspaceId: string, id: string): Promise<boolean>;
}

export interface RoleStore {
  /** False (nothing written) when the name is taken in the workspace, ignoring case. */
  create(role: RoleRecord): Promise<boolean>;
  get(workspaceId: string, id: string): Promise<RoleRecord | null>;
  /** By name, ignoring case. */
  findByName(workspaceId: string, name: string): Promise<RoleRecord | null>;
  getMany(workspaceId: string, ids: readonly string[]): Promise<RoleRecord[]>;
  /** By id; `search` keeps those whose name contains it, ignoring case. */
  list(workspaceId: string, page: PageRequest & { search?: string }): Promise<Page<RoleRecord>>;
  /** Atomically replaces a role's permissions. Null when the role is absent. */
  setPermissions(workspaceId: string, id: string, permissionIds: readonly string[]): Promise<RoleRecord | null>;
  delete(workspaceId: string, id: string): Promise<boolean>;
}

/** What an identity credit change decides: the balance to write (null removes it, undefined leaves it), and a result. */
export interface IdentityCreditsChange<R> {
  credits?: CreditRecord | null;
  result: R;
}

export interface IdentityStore {
  /**
   * Stores an identity with its credit balance (absent or null: none). False (nothing written) when a live identity
   * of the workspace has this externalId.
   */
  create(identity: IdentityRecord, credits?: CreditRecord | null): Promise<boolean>;
  /** By id, deleted ones included. */
  get(workspaceId: string, id: string): Promise<IdentityRecord | null>;
  /** The live identity with this externalId. */
  findByExternalId(workspaceId: string, externalId: string): Promise<IdentityRecord | null>;
  getMany(workspaceId: string, ids: readonly string[]): Promise<IdentityRecord[]>;
  /** Live identities by id; `search` keeps those whose externalId contains it, ignoring case. */
  list(workspaceId: string, page: PageRequest & { search?: string }): Promise<Page<IdentityRecord>>;
  /** Atomically changes a live identity's meta and rate limits. Null when absent or deleted. */
  update(workspaceId: string, id: string, change: (identity: IdentityRecord) => IdentityRecord): Promise<IdentityRecord | null>;
  /** Soft-deletes a live identity, frees its externalId and removes its balance. False when absent or already deleted. */
  markDeleted(workspaceId: string, id: string, at: number): Promise<boolean>;
  /** The identity's credit balance, shared by its keys without one of their own; null when it has none. */
  getCredits(workspaceId: string, id: string): Promise<CreditRecord | null>;
  /** Balances of several identities, by id (identities without one are absent from the map). */
  getCreditsMany(workspaceId: string, ids: readonly string[]): Promise<Map<string, CreditRecord>>;
  /**
   * Changes a live identity's balance atomically: `change` sees the identity and its balance and says what to
   * write. It may run more than once when another writer changes either at the same time. Null when the identity
   * is absent or deleted.
   */
  updateCredits<R>(
    workspaceId: string,
    id: string,
    change: (identity: IdentityRecord, credits: CreditRecord | null) => IdentityCreditsChange<R>,
  ): Promise<R | null>;
  /** As KeyStore.refundCredits, for the identity's balance. */
  refundCredits(workspaceId: string, id: string, amount: number, now: number): Promise<number | null>;
}

export interface RatelimitNamespaceStore {
  /** Stores a new namespace. Returns false (and changes nothing) when its id, or its name in the workspace, is taken. */
  createNamespace(namespace: RatelimitNamespaceRecord): Promise<boolean>;
  /** The namespace with this id in this workspace, deleted or not; null when absent or in another workspace. */
  getNamespace(workspaceId: string, namespaceId: string): Promise<RatelimitNamespaceRecord | null>;
  /** The namespace with this name in this workspace, deleted or not. */
  findNamespaceByName(workspaceId: string, name: string): Promise<RatelimitNamespaceRecord | null>;
  /** Every namespace of the workspace, deleted ones included, ordered by id. */
  listNamespaces(workspaceId: string): Promise<RatelimitNamespaceRecord[]>;
  /** Soft-deletes a live namespace. Returns the deleted record, or null when it was absent or already deleted. */
  markNamespaceDeleted(workspaceId: string, namespaceId: string, at: number): Promise<RatelimitNamespaceRecord | null>;
  /**
   * The namespace and a token that changes whenever one of its overrides is set or deleted, read together in one
   * step so a cache can revalidate cheaply and reload the overrides only when they changed.
   */
  namespaceState(
    workspaceId: string,
    namespaceId: string,
  ): Promise<{ namespace: RatelimitNamespaceRecord; overridesVersion: string } | null>;
  /**
   * Upsert on (namespace, identifier), atomically: an existing override keeps its id and createdAt and takes the
   * new limit and duration; otherwise `override` is stored as given. Returns the stored record.
   */
  setOverride(override: RatelimitOverrideRecord): Promise<RatelimitOverrideRecord>;
  /** The override stored under exactly this identifier or pattern (no wildcard matching). */
  getOverride(workspaceId: string, namespaceId: string, identifier: string): Promise<RatelimitOverrideRecord | null>;
  /** Deletes the override stored under exactly this identifier or pattern. Returns it, or null when there was none. */
  deleteOverride(workspaceId: string, namespaceId: string, identifier: string): Promise<RatelimitOverrideRecord | null>;
  /** A keyset page: overrides whose id is >= `cursor` (all when absent), ordered by id, at most `limit`. */
  listOverrides(workspaceId: string, namespaceId: string, page: { cursor?: string; limit: number }): Promise<RatelimitOverrideRecord[]>;
  /** Every override of the namespace, in no particular order (for matching identifiers). */
  allOverrides(workspaceId: string, namespaceId: string): Promise<RatelimitOverrideRecord[]>;
}

export type { Broadcast, BroadcastListener, CommandListener, StoreHealth } from "./connection-interfaces.js";

export interface Stores {
  readonly kind: "memory" | "redis";
  readonly rootKeys: RootKeyStore;
  readonly apis: ApiStore;
  readonly keys: KeyStore;
  readonly permissions: PermissionStore;
  readonly roles: RoleStore;
  readonly identities: IdentityStore;
  readonly ratelimitNamespaces: RatelimitNamespaceStore;
  readonly ratelimitCounters: RatelimitCounterStore;
  readonly analyticsQuota: AnalyticsQuotaStore;
  readonly dashboardSessions: DashboardSessionStore;
  readonly portals: PortalStore;
  readonly portalSessions: PortalSessionStore;
  readonly routes: RouteStore;
  readonly webhooks: WebhookStore;
  /** Deliveries waiting to go out: Redis streams with a consumer group, or this process's memory. */
  readonly webhookOutbox: WebhookOutbox;
  /** Which instance produces usage reports now, and how far each endpoint's have got (docs/usage.md). */
  readonly usageReports: UsageReportStore;
  /**
   * Where audit entries wait, durably, for the analytics engine (a Redis stream); memory stores have none: the
   * embedded engine keeps a journal of its own (docs/audit-log.md#what-survives-what).
   */
  readonly auditOutbox?: AuditOutbox;
  readonly health: StoreHealth;
  /** Carries cache invalidations (and any other news every instance must hear) between instances. */
  readonly broadcast: Broadcast;
  /**
   * Releases connections. Redis first makes a last attempt at settling the calls that may have spent credits and
   * got no answer in time (see storage/redis/credit-reconciler.ts). Idempotent.
   */
  close(): Promise<void>;
}
