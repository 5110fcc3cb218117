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
  /** One URL, or a pool of targets (docs/gateway.md#upstream-pools). */
  upstream: string | UpstreamPoolRecord;
  /** In evaluation order. */
  policies: PolicyRecord[];
  forward?: RouteForward;
  /** Overrides gateway.upstreamTimeoutMs for this route. */
  timeoutMs?: number;
  /** The route's match prefix is removed from the path before it is appended to the upstream's path. */
  stripPrefix?: boolean;
  /** The path (after stripPrefix) with `regex` (RE2) replaced by `replacement` (`$1` for a group). */
  rewrite?: RouteRewrite;
  /** The Host the upstream gets: its own (the default) or the client's. */
  host?: "upstream" | "client";
  /** The largest request body, in bytes: a larger one is refused (413) before the upstream gets the rest. */
  bodyLimit?: number;
  /** Whether an OpenAPI document was uploaded for the route (keygate.setRouteOpenApi); its text is stored apart. */
  openApi?: { uploadedAt: number; title?: string };
  createdAt: number;
  updatedAt: number;
}

/** Several targets behind one route, balanced, with passive (and optionally active) health, retries and TLS. */
export interface UpstreamPoolRecord {
  targets: UpstreamTargetRecord[];
  /** "round-robin" (smooth weighted, the default) or "least-connections" (calls in flight per unit of weight). */
  balance?: UpstreamBalance;
  health?: UpstreamHealthRecord;
  retry?: UpstreamRetryRecord;
  tls?: UpstreamTlsRecord;
}

export const UPSTREAM_BALANCES = ["round-robin", "least-connections"] as const;
export type UpstreamBalance = (typeof UPSTREAM_BALANCES)[number];

export interface UpstreamTargetRecord {
  /** http(s) URL; every target of a pool has the same path. */
  url: string;
  /** Share of the requests, 1 when absent. */
  weight?: number;
}

export interface UpstreamHealthRecord {
  /** Failures in a row that eject a target, for how long, and whether a 5xx answer counts as one. */
  passive?: { failures?: number; cooldownMs?: number; on5xx?: boolean };
  /** Probes every target on its own, from each process. */
  active?: {
    path: string;
    intervalMs?: number;
    timeoutMs?: number;
    /** Probes passed in a row that bring a target back, failed in a row that take it out. */
    healthyThreshold?: number;
    unhealthyThreshold?: number;
    /** Statuses that pass; 200 to 399 when absent. */
    statuses?: number[];
  };
}

export interface UpstreamRetryRecord {
  /** Statuses on which an idempotent request is tried again on another target. */
  statuses?: number[];
  /** Retries at most, each on a target not tried yet (1 when absent). */
  attempts?: number;
}

/** Files read when the route is compiled: the CA to trust, and the client certificate and key (mTLS). */
export interface UpstreamTlsRecord {
  ca?: string;
  cert?: string;
  key?: string;
  servername?: string;
  rejectUnauthorized?: boolean;
}

export const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

/** What a route takes: a path prefix on segment boundaries, and optionally only some methods. */
export interface RouteMatchRecord {
  prefix: string;
  methods?: HttpMethod[];
}

/** A rewrite of the path sent upstream: the first match of `regex` (RE2) replaced; `$1`... name its groups. */
export interface RouteRewrite {
  regex: string;
  replacement: string;
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

/** An allowed origin: exactly one of `exact` or `regex` (RE2, matching the whole origin). */
export interface CorsOrigin {
  exact?: string;
  regex?: string;
}

/** keygate: CORS (preflights answered at the gateway, the CORS headers added to every answer of an allowed origin). */
export interface CorsPolicy {
  /** `"*"`: any origin. */
  allowOrigins: "*" | CorsOrigin[];
  /** What a preflight may ask for; by default the route's methods (every method when it lists none). */
  allowMethods?: HttpMethod[];
  /** Request headers a preflight may ask for; by default those it asks for. */
  allowHeaders?: string[];
  /** Answer headers a page may read besides the CORS-safelisted ones. */
  exposeHeaders?: string[];
  allowCredentials?: boolean;
  /** How long a browser may keep a preflight's answer. */
  maxAgeSeconds?: number;
}

/** One gateway policy: exactly one of `keyauth`, `ratelimit`, `firewall`, `openapi`, `logging` or `cors`. */
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
  cors?: CorsPolicy;
}
