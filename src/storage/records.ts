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

/** The usage balance of a key with limited credits. A key without one is unlimited. */
export interface CreditRecord {
  remaining: number;
  refill?: CreditRefill;
  /** When the balance was last set or refilled; refills due after this are applied lazily. */
  lastRefillAt: number;
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

/**
 * A gateway route managed through the API (keygate.createRoute and friends), in the store every instance reads
 * its route table from. Its policies follow Unkey's gateway `Policy` shape (docs/gateway.md#policies).
 */
export interface RouteRecord {
  /** `rt_…` */
  id: string;
  /** The workspace of the root key that created it: its policies may name that workspace's APIs only. */
  workspaceId: string;
  /** Unique among every route, those of the configuration file included. */
  name: string;
  match: RouteMatchRecord;
  upstream: string;
  /** In evaluation order. */
  policies: PolicyRecord[];
  forward?: RouteForward;
  /** Overrides gateway.upstreamTimeoutMs for this route. */
  timeoutMs?: number;
  /** Whether an OpenAPI document was uploaded for the route (keygate.setRouteOpenApi); its text is stored apart. */
  openApi?: { uploadedAt: number; title?: string };
  createdAt: number;
  updatedAt: number;
}

export const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

/** What a route takes: a path prefix on segment boundaries, and optionally only some methods. */
export interface RouteMatchRecord {
  prefix: string;
  methods?: HttpMethod[];
}

/** Headers the upstream gets (any the client sent of the same names are dropped first). */
export interface RouteForward {
  /** A JSON description of the verified key (docs/gateway.md#the-principal). */
  principal?: string;
  keyId?: string;
  identity?: string;
  externalId?: string;
}

/** A setting that holds nothing: what matters is that it is there (`bearer: {}`). */
export type NoSettings = Record<never, never>;

/** Exactly one of `exact`, `prefix` or `regex` (RE2 syntax). */
export interface StringMatch {
  exact?: string;
  prefix?: string;
  regex?: string;
  ignoreCase?: boolean;
}

/** A header or query parameter: present (`present: true`), or with a value that matches. */
export interface FieldMatch {
  name: string;
  present?: true;
  value?: StringMatch;
}

/** Exactly one of the four. */
export interface MatchExpr {
  path?: { path: StringMatch };
  method?: { methods: HttpMethod[] };
  header?: FieldMatch;
  queryParam?: FieldMatch;
}

/** Exactly one of the three. */
export interface KeyLocation {
  bearer?: NoSettings;
  /** keygate: `scheme`, when set, must come first (`Token <key>`, any case); `stripPrefix` is removed when present. */
  header?: { name: string; stripPrefix?: string; scheme?: string };
  queryParam?: { name: string };
}

export interface KeyauthPolicy {
  /** API ids (or their key space ids, `ks_…`) whose keys are accepted, all of the route's workspace. */
  keyspaces: string[];
  /** Tried in order; `Authorization: Bearer` when absent. */
  locations?: KeyLocation[];
  permissionQuery?: string;
  /** The key's (or its identity's) named limits, or limits of their own for the key (`limit` and `duration`). */
  ratelimits?: { name: string; limit?: number; duration?: number; cost?: number }[];
  /** Credits each request takes; 1 when absent, 0 verifies without spending. */
  credits?: number;
}

/** Exactly one source. */
export interface RatelimitIdentifier {
  remoteIp?: NoSettings;
  header?: { name: string };
  authenticatedSubject?: NoSettings;
  path?: NoSettings;
  principalField?: { path: string };
}

export interface RatelimitPolicy {
  limit: number;
  windowMs: number;
  /** 1 to 5 sources making one compound identifier. */
  identifiers: RatelimitIdentifier[];
  /** keygate: units each request takes (default 1). */
  cost?: number;
  /**
   * keygate: the rate limit namespace it counts in (its overrides apply); by default one of the route's own,
   * `<route name>.<policy name>`, so that replacing the policies keeps the counts of a policy that stays.
   */
  namespace?: string;
}

export interface FirewallPolicy {
  action: "ACTION_DENY";
  /** keygate: deny only clients outside these addresses and CIDR ranges. */
  ipAllow?: string[];
  /** keygate: deny only clients within these addresses and CIDR ranges. */
  ipDeny?: string[];
}

export interface LoggingPolicy {
  requestHeaders?: boolean;
  responseHeaders?: boolean;
  requestBody?: boolean;
  responseBody?: boolean;
  query?: boolean;
}

/** One gateway policy: exactly one of `keyauth`, `ratelimit`, `firewall`, `openapi` or `logging`. */
export interface PolicyRecord {
  /** `pol_…`, kept when the policy is updated on its own (updateRoutePolicy). */
  id: string;
  name: string;
  enabled: boolean;
  /** Every expression must match for the policy to apply; absent: every request. At most 10. */
  match?: MatchExpr[];
  keyauth?: KeyauthPolicy;
  ratelimit?: RatelimitPolicy;
  firewall?: FirewallPolicy;
  openapi?: NoSettings;
  logging?: LoggingPolicy;
}
