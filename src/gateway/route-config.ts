import { type Static, Type } from "typebox";
import { describedPattern } from "../http/patterns.js";
import { ID_PATTERN, Nullable, Strict, StringEnum } from "../http/schemas.js";
import { HTTP_METHODS, UPSTREAM_BALANCES } from "../storage/route-records.js";
import { CorsPolicySchema } from "./policy-schema.js";

/** HTTP methods a route can be limited to. */
export const ROUTE_METHODS = HTTP_METHODS;

/** The characters of an HTTP header name (an RFC 9110 token). */
const TOKEN_CHARACTERS = "A-Za-z0-9!#$%&'*+.^_`|~-";
const HEADER_NAME = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: describedPattern(`^[${TOKEN_CHARACTERS}]+$`, "be an HTTP header name (letters, digits and ! # $ % & ' * + . ^ _ ` | ~ -)"),
});
const LABEL_PATTERN = describedPattern("^[A-Za-z0-9._-]+$", "contain only letters, digits, ., _ and -");

export const RouteKeySchema = Strict({
  /** Read the key from this request header... */
  header: Type.Optional(HEADER_NAME),
  /** ...after this scheme (`Authorization: Bearer <key>`); without a scheme the whole header value is the key. */
  scheme: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: LABEL_PATTERN })),
  /** Or read it from this query parameter. */
  query: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
});

export const NamespaceLimitSchema = Strict({
  namespace: Type.String({ minLength: 1, maxLength: 255 }),
  /** What is counted: the key, its identity (the key when it has none), the client IP, or a request header. */
  identifier: Type.String({
    pattern: describedPattern(`^(key|identity|ip|header:[${TOKEN_CHARACTERS}]+)$`, "be key, identity, ip or header:<header name>"),
  }),
  limit: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
  duration: Type.Integer({ minimum: 1_000, maximum: 2_592_000_000 }),
  cost: Type.Integer({ minimum: 0, maximum: 1_000, default: 1 }),
});

export const RouteNameSchema = Type.String({ minLength: 1, maxLength: 100, pattern: LABEL_PATTERN });
/** A path prefix on segment boundaries: `/orders` matches `/orders` and `/orders/1`, not `/orders-old`. */
export const RoutePrefixSchema = Type.String({ minLength: 1, maxLength: 1024, pattern: describedPattern("^/", "start with /") });
/** Where allowed requests go; the request path is appended to the upstream's own path. */
export const RouteUpstreamSchema = Type.String({
  pattern: describedPattern("^https?://[^\\s/?#]+[^\\s]*$", "be an http:// or https:// URL with a host"),
});
const STATUS = Type.Integer({ minimum: 100, maximum: 599 });
const FILE_PATH = Type.String({ minLength: 1, maxLength: 4096 });
/** A pool of upstream targets (docs/gateway.md#upstream-pools); defaults are the compiler's, not written in. */
export const RouteUpstreamPoolSchema = Strict({
  targets: Type.Array(Strict({ url: RouteUpstreamSchema, weight: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000 })) }), {
    minItems: 1,
    maxItems: 64,
  }),
  balance: Type.Optional(StringEnum(UPSTREAM_BALANCES)),
  health: Type.Optional(
    Strict({
      passive: Type.Optional(
        Strict({
          failures: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000 })),
          cooldownMs: Type.Optional(Type.Integer({ minimum: 100, maximum: 3_600_000 })),
          on5xx: Type.Optional(Type.Boolean()),
        }),
      ),
      active: Type.Optional(
        Strict({
          path: RoutePrefixSchema,
          intervalMs: Type.Optional(Type.Integer({ minimum: 100, maximum: 3_600_000 })),
          timeoutMs: Type.Optional(Type.Integer({ minimum: 100, maximum: 60_000 })),
          healthyThreshold: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
          unhealthyThreshold: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
          statuses: Type.Optional(Type.Array(STATUS, { minItems: 1, maxItems: 100, uniqueItems: true })),
        }),
      ),
    }),
  ),
  retry: Type.Optional(
    Strict({
      statuses: Type.Optional(Type.Array(STATUS, { maxItems: 100, uniqueItems: true })),
      attempts: Type.Optional(Type.Integer({ minimum: 1, maximum: 5 })),
    }),
  ),
  tls: Type.Optional(
    Strict({
      ca: Type.Optional(FILE_PATH),
      cert: Type.Optional(FILE_PATH),
      key: Type.Optional(FILE_PATH),
      servername: Type.Optional(Type.String({ minLength: 1, maxLength: 253 })),
      rejectUnauthorized: Type.Optional(Type.Boolean()),
    }),
  ),
});
/**
 * One URL, or a pool of targets: a string is checked as a URL and anything else as a pool (if/then/else rather than
 * anyOf, so a bad value gets the messages of the one shape it meant).
 */
export const RouteUpstreamOrPoolSchema = Type.Unsafe<string | Static<typeof RouteUpstreamPoolSchema>>({
  if: { type: "string" },
  // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then/else, never awaited.
  then: RouteUpstreamSchema,
  else: RouteUpstreamPoolSchema,
});
/** Headers added to the upstream request (any incoming header of the same name is dropped first). */
export const RouteForwardSchema = Strict({
  /** A JSON description of the verified key (docs/gateway.md#the-principal). */
  principal: Type.Optional(HEADER_NAME),
  keyId: Type.Optional(HEADER_NAME),
  identity: Type.Optional(HEADER_NAME),
  externalId: Type.Optional(HEADER_NAME),
});

const ROUTE_HOSTS = ["upstream", "client"] as const;

/** How the path and Host a route sends upstream are made, and the largest body it takes (the file's and the API's). */
export const RouteEdgeSchemas = {
  /** Remove the route's match prefix from the path before it is appended to the upstream's path. */
  stripPrefix: Type.Boolean(),
  /** Replace the first match of `regex` (RE2) in the path (after stripPrefix) with `replacement` (`$1` names a group). */
  rewrite: Strict({ regex: Type.String({ minLength: 1, maxLength: 1024 }), replacement: Type.String({ maxLength: 1024 }) }),
  /** The Host the upstream gets: its own (`upstream`, the default) or the client's (`client`). */
  host: StringEnum(ROUTE_HOSTS),
  /** The largest request body in bytes; a larger one is refused with 413 before the upstream gets the rest. */
  bodyLimit: Type.Integer({ minimum: 0, maximum: 1_099_511_627_776 }),
};

export const RouteEdgeFields = {
  stripPrefix: Type.Optional(RouteEdgeSchemas.stripPrefix),
  rewrite: Type.Optional(RouteEdgeSchemas.rewrite),
  host: Type.Optional(RouteEdgeSchemas.host),
  bodyLimit: Type.Optional(RouteEdgeSchemas.bodyLimit),
};

/** The same, each of them null to remove it (keygate.updateRoute). */
export const RouteEdgeChanges = {
  stripPrefix: Type.Optional(Nullable(RouteEdgeSchemas.stripPrefix)),
  rewrite: Type.Optional(Nullable(RouteEdgeSchemas.rewrite)),
  host: Type.Optional(Type.Unsafe<(typeof ROUTE_HOSTS)[number] | null>({ type: ["string", "null"], enum: [...ROUTE_HOSTS, null] })),
  bodyLimit: Type.Optional(Nullable(RouteEdgeSchemas.bodyLimit)),
};

export const RouteSchema = Strict({
  name: RouteNameSchema,
  match: Strict({
    prefix: RoutePrefixSchema,
    methods: Type.Optional(Type.Array(StringEnum(ROUTE_METHODS), { minItems: 1, uniqueItems: true })),
  }),
  /**
   * Where allowed requests go. Without one the route is decision-only: only the forward-auth door decides its requests
   * (the proxy in front of keygate forwards them), and nothing about forwarding may be set (docs/forward-auth.md).
   */
  upstream: Type.Optional(RouteUpstreamOrPoolSchema),
  /** Keys of other APIs are refused. Without it the route is public: it takes requests without a key. */
  apiId: Type.Optional(Type.String({ minLength: 3, maxLength: 255, pattern: ID_PATTERN })),
  /** A public route's workspace (its namespace limits, analytics and dashboard); a route with `apiId` has its API's. */
  workspaceId: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: ID_PATTERN })),
  key: Type.Optional(RouteKeySchema),
  /** A permission query the key must satisfy, e.g. "orders.read OR admin". */
  permissions: Type.Optional(Type.String({ minLength: 1, maxLength: 1000 })),
  /** The key's (or its identity's) named limits to apply, with their cost. */
  ratelimits: Type.Optional(
    Type.Array(
      Strict({ name: Type.String({ minLength: 3, maxLength: 255 }), cost: Type.Integer({ minimum: 0, maximum: 1_000, default: 1 }) }),
      { maxItems: 50 },
    ),
  ),
  credits: Type.Optional(Strict({ cost: Type.Integer({ minimum: 0, maximum: 1_000_000_000 }) })),
  namespaceLimits: Type.Optional(Type.Array(NamespaceLimitSchema, { maxItems: 20 })),
  forward: Type.Optional(RouteForwardSchema),
  /** Overrides gateway.upstreamTimeoutMs for this route. */
  timeoutMs: Type.Optional(Type.Integer({ minimum: 100, maximum: 3_600_000 })),
  /** What the route's analytics events hold besides the defaults: `headers` records request and response headers. */
  analytics: Type.Optional(Strict({ headers: Type.Optional(Type.Boolean()) })),
  /** A cors policy, run before the others (docs/gateway.md#cors). */
  cors: Type.Optional(CorsPolicySchema),
  ...RouteEdgeFields,
});

export const GatewaySettingsSchema = Strict(
  {
    /** How long an upstream may take to start answering (and between body chunks) before the client gets 504. */
    upstreamTimeoutMs: Type.Integer({ minimum: 100, maximum: 3_600_000, default: 30_000 }),
    /** Give credits back when the upstream fails with 5xx or never answers. */
    refundCreditsOnUpstreamFailure: Type.Boolean({ default: true }),
    /**
     * Which hops in front of keygate may report the client in X-Forwarded-For (identifier `ip`): false, true (all),
     * a hop count, or addresses/CIDR ranges/named ranges (a list or one comma-separated string). See TrustProxySetting.
     * One JSON Schema type list, so a bad value gets one message rather than one per branch.
     */
    trustProxy: Type.Unsafe<boolean | number | string | string[]>({
      type: ["boolean", "integer", "string", "array"],
      minimum: 0,
      maximum: 100,
      minLength: 1,
      items: { type: "string", minLength: 1 },
      minItems: 1,
      default: false,
    }),
    /** Reload `routes` when the configuration file changes (SIGHUP always reloads). */
    watchConfig: Type.Boolean({ default: true }),
    /** Routes made through the API (the file's are the operator's, unrestricted). */
    apiRoutes: Strict(
      {
        /**
         * Addresses, CIDR ranges and host names (`*.internal`: every name under it) their upstreams may be at although
         * loopback, private, link-local or reserved: the operator's network is closed to them otherwise.
         */
        allowedUpstreams: Type.Array(Type.String({ minLength: 1, maxLength: 253 }), { maxItems: 1_000, default: [] }),
      },
      { default: {} },
    ),
    /**
     * The forward-auth door: a proxy in front of the API (nginx auth_request, Traefik ForwardAuth, Caddy forward_auth)
     * asks keygate there about each request, and forwards it when keygate answers 200 (docs/forward-auth.md).
     */
    forwardAuth: Strict(
      {
        enabled: Type.Boolean({ default: true }),
        /** The door's path on the gateway's port; it takes precedence over any route's prefix. */
        path: Type.String({
          minLength: 2,
          maxLength: 1024,
          default: "/_keygate/auth",
          pattern: describedPattern("^/[^?#\\s]*$", "be a path starting with /, without '?', '#' or spaces"),
        }),
      },
      { default: {} },
    ),
    /** The Via keygate adds to what it forwards, and the loops and long chains it refuses (508). */
    via: Strict(
      {
        /** keygate's name in Via; by default one derived from the Redis every instance of the deployment shares. */
        pseudonym: Type.Optional(
          Type.String({
            pattern: describedPattern(`^[${TOKEN_CHARACTERS}]{1,64}$`, "be 1 to 64 letters, digits and ! # $ % & ' * + . ^ _ ` | ~ -"),
          }),
        ),
        /** A request that came through more proxies than this (Via entries) is refused. */
        maxHops: Type.Integer({ minimum: 1, maximum: 100, default: 10 }),
      },
      { default: {} },
    ),
  },
  { default: {} },
);

export type RouteConfig = Static<typeof RouteSchema>;
export type GatewaySettings = Static<typeof GatewaySettingsSchema>;
