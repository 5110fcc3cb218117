import { deepFreeze } from "../../lib/freeze.js";
import { Interner } from "../../lib/interner.js";
import { IpAllowlist } from "../../lib/ip-allowlist.js";
import type { KeyStore } from "../../storage/interfaces.js";
import type { CreditRefill, IdentityRecord, KeyRecord, PermissionRecord, RatelimitConfig, RoleRecord } from "../../storage/records.js";
import type { ApiService } from "../apis/api-service.js";
import { type IdentityService, type IdentityView, viewIdentity } from "../identities/identity-service.js";
import { PermissionSet } from "../permissions/permission-set.js";
import { identityLimitBucket, keyLimitBucket } from "../ratelimit/buckets.js";
import type { KeyLimitCheck } from "../ratelimit/limit-decision.js";
import type { RbacService } from "../rbac/rbac-service.js";

/** Everything verification needs to know about a key, resolved once and cached by the key's hash. */
export interface KeyView {
  keyId: string;
  workspaceId: string;
  apiId: string;
  keySpaceId: string;
  expires?: number;
  enabled: boolean;
  /** The key's direct permissions and its roles' permissions. */
  permissionSet: PermissionSet;
  identity?: { id: string; externalId: string };
  /** The API's allowlist of client addresses, when it has one: verifications from elsewhere are FORBIDDEN. */
  ipAllowlist?: IpAllowlist;
  /** Whether a credit balance pays for the key: its own, or its identity's (unlimited keys never touch credits). */
  hasCredits: boolean;
  /**
   * Which balance pays, when one does: the key's own, else its identity's (docs/decisions.md#identity-credits).
   * Cached with the view: an identity's balance given or taken away invalidates the workspace's views.
   */
  creditsSource?: "key" | "identity";
  /** The key pays with its own balance although its identity has one too (keys.verifyKey then says which paid). */
  identityHasCredits?: true;
  /** When the paying balance refills (for a Retry-After once credits are exhausted). */
  creditRefill?: CreditRefill;
  /** The paying balance's low threshold, when it has one. */
  creditsLowThreshold?: number;
  /** The key's fields every verification of it shows, worked out once per view (the view is cached). */
  shown: KeyDescription;
  /**
   * The limits a verification can apply by name, at cost 1: the key's own, and its identity's where the key has
   * none of that name (a key limit wins). Identity limits count per identity, so all its keys share them.
   */
  namedLimits: ReadonlyMap<string, KeyLimitCheck>;
  /** Those of namedLimits that apply to every verification (autoApply), in order. */
  autoApplied: readonly KeyLimitCheck[];
}

/**
 * What keys.verifyKey shows of a key once it is known to exist (docs/decisions.md#verification-order), each field
 * only when set. verify-key.ts copies it field by field: a field added here is added there too.
 */
export interface KeyDescription {
  keyId: string;
  name?: string;
  meta?: Record<string, unknown>;
  expires?: number;
  enabled: boolean;
  permissions?: string[];
  roles?: string[];
  identity?: IdentityView;
}

export interface KeyViewSources {
  keys: KeyStore;
  apis: ApiService;
  rbac: RbacService;
  identities: IdentityService;
}

/**
 * The view of the live key with this hash in the workspace; null when there is none, when it was deleted, when it
 * awaits its migration, or when its API was deleted (all of which verify as NOT_FOUND).
 */
export async function loadKeyView(sources: KeyViewSources, workspaceId: string, hash: string): Promise<KeyView | null> {
  const key = await sources.keys.findByHash(workspaceId, hash);
  // A key pending migration is found only through its migration (keys.verifyKey with migrationId), never by hash.
  if (!key || key.deletedAt !== undefined || key.pendingMigrationId !== undefined) return null;
  // Everything the record names, read at once: on Redis one round trip (auto-pipelining), misses of other keys
  // issued in the same turn sharing it. The key's own permissions come with it; its roles' others need one more.
  const [api, roles, identities, keyCredits, identityCredits, direct] = await Promise.all([
    sources.apis.liveRecord(workspaceId, key.apiId),
    key.roleIds.length === 0 ? NO_ROLES : sources.rbac.rolesById(workspaceId, key.roleIds),
    key.identityId ? sources.identities.liveById(workspaceId, [key.identityId]) : NO_IDENTITIES,
    sources.keys.getCredits(workspaceId, key.id),
    key.identityId ? sources.identities.creditsOf(workspaceId, key.identityId) : NO_CREDITS,
    key.permissionIds.length === 0 ? NO_PERMISSION_RECORDS : sources.rbac.permissionsById(workspaceId, key.permissionIds),
  ]);
  if (!api) return null;
  const fromRoles =
    roles.length === 0 ? [] : [...new Set(roles.flatMap((role) => role.permissionIds))].filter((id) => !key.permissionIds.includes(id));
  const more = fromRoles.length === 0 ? [] : await sources.rbac.permissionsById(workspaceId, fromRoles);
  const permissions = direct.length + more.length === 0 ? NO_NAMES : [...direct, ...more].map((permission) => permission.slug);
  const identity = key.identityId ? identities.get(key.identityId) : undefined;
  // A key's own balance pays; a key without one spends its (live) identity's, when that has one.
  const paidByIdentity = keyCredits === null && identity !== undefined && identityCredits !== null;
  const credits = paidByIdentity ? identityCredits : keyCredits;
  const namedLimits = limitsOf(key, identity);
  const shared = sharedParts(workspaceId, key, permissions, roles, identity);
  // Built on a cache miss, read by every verification of the key: a literal, then the optional fields assigned
  // (docs/architecture.md#conventions). What many keys have in common is shared with them (SHARED above).
  const shown: KeyDescription = { keyId: key.id, enabled: key.enabled };
  if (key.name !== undefined) shown.name = key.name;
  if (key.meta !== undefined) shown.meta = key.meta;
  if (key.expires !== undefined) shown.expires = key.expires;
  if (shared.permissions.length > 0) shown.permissions = shared.permissions as string[];
  if (shared.roles.length > 0) shown.roles = shared.roles as string[];
  if (shared.identity) shown.identity = shared.identity.shown;
  const view: KeyView = {
    keyId: key.id,
    workspaceId: shared.workspaceId,
    apiId: shared.apiId,
    keySpaceId: shared.keySpaceId,
    enabled: key.enabled,
    permissionSet: shared.permissionSet,
    hasCredits: credits !== null,
    shown,
    namedLimits,
    autoApplied: namedLimits.size === 0 ? NO_LIMITS : [...namedLimits.values()].filter((limit) => limit.autoApply),
  };
  if (key.expires !== undefined) view.expires = key.expires;
  if (shared.identity) view.identity = shared.identity.key;
  if (api.ipAllowlist && api.ipAllowlist.length > 0) view.ipAllowlist = compiledAllowlist(api.ipAllowlist);
  if (credits) view.creditsSource = paidByIdentity ? "identity" : "key";
  if (keyCredits && identity && identityCredits) view.identityHasCredits = true;
  if (credits?.refill)
    view.creditRefill = SHARED.refills.get(refillId(credits.refill), () => Object.freeze({ ...credits.refill }) as CreditRefill);
  if (credits?.lowThreshold !== undefined) view.creditsLowThreshold = credits.lowThreshold;
  return view;
}

/**
 * What a cached view costs the heap on its own, estimated in bytes: the view, its description, its own strings
 * (id, name), meta and limits. What it shares with other views (SHARED: ids, permission sets, roles, identities,
 * refills, allowlists) is not counted; those pools are bounded by count instead. bench/key-view-memory.ts compares
 * the estimate with the heap.
 */
export function keyViewBytes(view: KeyView): number {
  const shown = view.shown;
  let bytes = VIEW_BYTES + stringBytes(view.keyId);
  if (shown.name !== undefined) bytes += stringBytes(shown.name);
  if (shown.meta !== undefined) bytes += JSON.stringify(shown.meta).length * JSON_HEAP_FACTOR;
  if (view.namedLimits.size > 0) bytes += LIMITS_BYTES + view.namedLimits.size * LIMIT_BYTES;
  return Math.ceil(bytes);
}

/** A view and its description with their usual fields (V8 objects, pointer-compressed). */
const VIEW_BYTES = 260;
/** A map of named limits, and each limit in it with its check and bucket name. */
const LIMITS_BYTES = 120;
const LIMIT_BYTES = 260;
/** How much more a parsed JSON value takes than its text, about (objects and their property arrays). */
const JSON_HEAP_FACTOR = 4;

/** A one-byte string's heap size (header and characters, rounded to 8). */
function stringBytes(text: string): number {
  return 16 + Math.ceil(text.length / 8) * 8;
}

const NO_NAMES: readonly string[] = Object.freeze([]);
const NO_ROLES: Promise<RoleRecord[]> = Promise.resolve([]);
const NO_IDENTITIES: Promise<Map<string, IdentityRecord>> = Promise.resolve(new Map());
const NO_CREDITS: Promise<null> = Promise.resolve(null);
const NO_PERMISSION_RECORDS: Promise<PermissionRecord[]> = Promise.resolve([]);
const NO_LIMITS: readonly KeyLimitCheck[] = Object.freeze([]);
const NO_NAMED_LIMITS: ReadonlyMap<string, KeyLimitCheck> = new Map();
const NO_PERMISSIONS = new PermissionSet([]);

/**
 * Values many keys have in common, kept once for every cached view that holds them: a million keys of one API in
 * one workspace share one copy of each id, and keys with the same permissions share one permission set. Bounded by
 * count (an Interner starts over when full); values are frozen, never changed in place.
 */
const SHARED = {
  ids: new Interner<string>(10_000),
  permissions: new Interner<{ names: readonly string[]; set: PermissionSet }>(10_000),
  roles: new Interner<readonly string[]>(10_000),
  identities: new Interner<{ key: { id: string; externalId: string }; shown: IdentityView }>(10_000),
  refills: new Interner<CreditRefill>(1_000),
};

/** The parts of a view shared with other keys' views, each from SHARED. */
function sharedParts(
  workspaceId: string,
  key: KeyRecord,
  permissions: readonly string[],
  roles: readonly RoleRecord[],
  identity: IdentityRecord | undefined,
) {
  const ids = SHARED.ids;
  const permissionParts =
    permissions.length === 0
      ? { names: NO_NAMES, set: NO_PERMISSIONS }
      : SHARED.permissions.get(permissions.join("\n"), () => ({
          names: Object.freeze([...permissions]),
          set: new PermissionSet(permissions),
        }));
  const roleNames =
    roles.length === 0 ? NO_NAMES : SHARED.roles.get(roles.map((role) => role.name).join("\n"), (id) => Object.freeze(id.split("\n")));
  return {
    workspaceId: ids.get(workspaceId, same),
    apiId: ids.get(key.apiId, same),
    keySpaceId: ids.get(key.keySpaceId, same),
    permissions: permissionParts.names,
    permissionSet: permissionParts.set,
    roles: roleNames,
    // An identity changes its meta and limits only: they are part of what makes two copies the same.
    identity:
      identity &&
      SHARED.identities.get(JSON.stringify([identity.id, identity.externalId, identity.meta, identity.ratelimits]), () =>
        sharedIdentity(identity),
      ),
  };
}

function same(id: string): string {
  return id;
}

function sharedIdentity(identity: IdentityRecord): { key: { id: string; externalId: string }; shown: IdentityView } {
  return { key: Object.freeze({ id: identity.id, externalId: identity.externalId }), shown: deepFreeze(viewIdentity(identity)) };
}

function refillId(refill: CreditRefill): string {
  return `${refill.interval}:${refill.amount}:${refill.refillDay ?? ""}`;
}

/** The limits a verification can apply by name: the key's own, and its identity's where the key has none of that name. */
function limitsOf(key: KeyRecord, identity: IdentityRecord | undefined): ReadonlyMap<string, KeyLimitCheck> {
  if (key.ratelimits.length === 0 && (!identity || identity.ratelimits.length === 0)) return NO_NAMED_LIMITS;
  const namedLimits = new Map<string, KeyLimitCheck>();
  for (const limit of key.ratelimits) namedLimits.set(limit.name, limitCheck(limit, keyLimitBucket(key.id, limit.name)));
  // Names are unique within a key and within an identity (replaceNamedLimits); a key limit wins over its identity's.
  if (identity) {
    for (const limit of identity.ratelimits) {
      if (!namedLimits.has(limit.name)) namedLimits.set(limit.name, limitCheck(limit, identityLimitBucket(identity.id, limit.name)));
    }
  }
  return namedLimits;
}

/** Allowlists compiled, by their entries: every cached key view of an API shares its API's one. */
const compiledAllowlists = new Map<string, IpAllowlist>();
const COMPILED_ALLOWLISTS_KEPT = 1_000;

function compiledAllowlist(entries: readonly string[]): IpAllowlist {
  const id = entries.join(" ");
  let compiled = compiledAllowlists.get(id);
  if (!compiled) {
    compiled = new IpAllowlist(entries);
    // A flood of distinct lists (many APIs, many changes) empties the map rather than growing it.
    if (compiledAllowlists.size >= COMPILED_ALLOWLISTS_KEPT) compiledAllowlists.clear();
    compiledAllowlists.set(id, compiled);
  }
  return compiled;
}

function limitCheck(limit: RatelimitConfig, bucket: string): KeyLimitCheck {
  return {
    kind: "key",
    id: limit.id,
    name: limit.name,
    autoApply: limit.autoApply,
    check: { bucket, limit: limit.limit, durationMs: limit.durationMs, cost: 1 },
  };
}
