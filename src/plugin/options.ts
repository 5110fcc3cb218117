import { Ajv } from "ajv";
import type { AnalyticsSettings } from "../analytics/index.js";
import { ConfigError, validateConfig } from "../config/load.js";
import type { KeygateConfig } from "../config/schema.js";
import type { RedisConfig } from "../config/storage-schema.js";
import { type CompiledPolicy, compileKeyRequirement, compilePolicies } from "../domain/routes/policy-compiler.js";
import type { Problems } from "../domain/routes/problems.js";
import type { PolicyInput } from "../domain/routes/route-service.js";
import { KeygateError } from "../errors/keygate-error.js";
import { keyLocation } from "../gateway/config-routes.js";
import type { AccessRoute } from "../gateway/gateway-request.js";
import { POLICY_LIST, type PolicyBody } from "../gateway/policy-schema.js";
import { toValidationIssues } from "../http/validation-issues.js";
import type { Clock } from "../lib/clock.js";
import { defined } from "../lib/defined.js";
import { policiesFromWire } from "../routes/v2/keygate/route-wire.js";

// The plugin's options, turned into the configuration a keygate server would have: the same schema, defaults and
// checks (a Redis given two ways, a bad URL), so the plugin connects exactly as a server with that file would.

/** storage.redis of a server's configuration, but the prefix (the plugin's own option). */
export type KeygateRedisOptions = Partial<Omit<RedisConfig, "prefix" | "breaker">> & { breaker?: Partial<RedisConfig["breaker"]> };

export interface KeygatePluginOptions {
  /** The servers' Redis: a redis:// or rediss:// URL, or storage.redis's forms (`url`, `cluster`, `sentinel`). */
  redis: string | KeygateRedisOptions;
  /** The servers' storage.redis.prefix (default `keygate`): the same prefix, the same keys, limits and credits. */
  prefix?: string;
  /**
   * Where this app's verifications are recorded: a ClickHouse server, as a server's `analytics.clickhouse`. Without
   * it they are only counted (`keygate_analytics_events_dropped_total{reason="analytics_off"}` in `app.keygate.metrics()`).
   */
  analytics?: {
    clickhouse: { url: string; database?: string; username?: string; password?: string; requestTimeoutMs?: number };
    /** The `region` column of this app's events. */
    region?: string;
    buffer?: Partial<AnalyticsSettings["buffer"]>;
  };
  /** ratelimit.fail and ratelimit.reservations, as the servers have them. */
  ratelimit?: { fail?: KeygateConfig["ratelimit"]["fail"]; reservations?: boolean };
  /** Where the `type` URL of a refusal points (errors.docsUrl). */
  docsUrl?: string;
  /** Time for the caches and credit refills; the system clock by default (tests inject one). */
  clock?: Clock;
}

/**
 * A route's protection, in its `config.keygate` (or given to `app.keygate.preHandler`), in one of three forms: the
 * fields of a configuration file's gateway route that say what a key must be (`apiId` and the fields beside it: the
 * shorthand for one keyauth policy); a route's `policies`, as `keygate.createRoute` takes them; or the name or id of
 * a stored `route` whose policies the app follows as they change.
 */
export type KeygateRouteOptions = KeygateKeyOptions | KeygatePolicyOptions | KeygateStoredRouteOptions;

/** The shorthand for one keyauth policy: the fields of a configuration file's gateway route. */
export interface KeygateKeyOptions {
  /** The API whose keys this route accepts (its id, or its key space's); its workspace is the route's. */
  apiId: string;
  /**
   * Where the key is: `Authorization: Bearer <key>` by default; `{ header: "x-api-key" }`, with `scheme` when the
   * value starts with one, or `{ query: "api_key" }`.
   */
  key?: { header?: string; scheme?: string; query?: string };
  /** A permission query the key must satisfy (`api.read AND (orders.write OR admin)`). */
  permissions?: string;
  /** The key's (or its identity's) named limits this request counts against (cost 1 by default), or limits of its own. */
  ratelimits?: { name: string; cost?: number; limit?: number; duration?: number }[];
  /** Credits each request takes from a key with a balance (1 when absent; 0 verifies without spending). */
  credits?: { cost: number };
  /** Recorded with each verification for analytics. */
  tags?: string[];
  policies?: never;
  route?: never;
}

/** A route's policies, as `keygate.createRoute` takes them (keyauth, ratelimit, firewall, openapi, logging, cors). */
export interface KeygatePolicyOptions {
  policies: PolicyBody[];
  /** The API whose workspace the route serves, when no keyauth policy names one. */
  apiId?: string;
  tags?: string[];
  route?: never;
  key?: never;
  permissions?: never;
  ratelimits?: never;
  credits?: never;
}

/** A stored route (its name or id) whose policies this route runs, as they are when each request arrives. */
export interface KeygateStoredRouteOptions {
  route: string;
  tags?: string[];
  apiId?: never;
  policies?: never;
  key?: never;
  permissions?: never;
  ratelimits?: never;
  credits?: never;
}

/** A route's options checked and compiled once, when the route is registered: policies to run, or a stored route's. */
export type CompiledRouteOptions = { kind: "policies"; route: AccessRoute } | { kind: "stored"; route: string; tags?: readonly string[] };

const SOURCE = "keygate plugin options";

/** The plugin's options as a server's configuration; throws the ConfigError a server would, naming the field. */
export function pluginConfig(options: KeygatePluginOptions): KeygateConfig {
  if (options === null || typeof options !== "object" || options.redis === undefined) {
    throw new ConfigError(SOURCE, ["redis: is required (a redis:// URL, or { url } / { cluster } / { sentinel })"]);
  }
  const redis = typeof options.redis === "string" ? { url: options.redis } : options.redis;
  const analytics = options.analytics
    ? {
        engine: "clickhouse",
        clickhouse: options.analytics.clickhouse,
        ...defined({ region: options.analytics.region, buffer: options.analytics.buffer }),
      }
    : { engine: "off" };
  return validateConfig(
    {
      storage: { redis: { ...redis, ...defined({ prefix: options.prefix }) } },
      analytics,
      ...defined({ ratelimit: options.ratelimit, errors: options.docsUrl === undefined ? undefined : { docsUrl: options.docsUrl } }),
    },
    SOURCE,
  );
}

/**
 * A route's options compiled as the gateway compiles a route's policies (the shorthand as one keyauth policy);
 * throws a ConfigError naming the route (`realm`) and each field.
 */
export function compileRouteOptions(options: KeygateRouteOptions, realm: string): CompiledRouteOptions {
  const problems: Problems = [];
  const compiled = compileForm(options ?? {}, realm, problems);
  if (compiled === undefined || problems.length > 0) {
    const fields = problems.map((problem) => `${fieldName(problem.at)}: ${problem.message}`);
    throw new ConfigError(`keygate options of route ${realm}`, fields.length > 0 ? fields : ["are not valid"]);
  }
  return compiled;
}

const SHORTHAND_FIELDS = ["key", "permissions", "ratelimits", "credits"] as const;

function compileForm(options: KeygateRouteOptions, realm: string, problems: Problems): CompiledRouteOptions | undefined {
  const tags = options.tags;
  const forms = [options.policies !== undefined, options.route !== undefined].filter(Boolean).length;
  if (forms > 1) problems.push({ at: "route", message: "names a stored route: it takes no policies" });
  if (options.policies !== undefined || options.route !== undefined) {
    for (const field of SHORTHAND_FIELDS) {
      if (options[field] !== undefined)
        problems.push({ at: field, message: "is a field of the apiId shorthand: write it in a keyauth policy" });
    }
  }
  if (options.route !== undefined) {
    if (typeof options.route !== "string" || options.route === "") problems.push({ at: "route", message: "must name a stored route" });
    if (options.apiId !== undefined) problems.push({ at: "apiId", message: "comes with the stored route" });
    return problems.length > 0 ? undefined : { kind: "stored", route: options.route, ...defined({ tags }) };
  }
  if (options.policies !== undefined) return compilePolicyList(options, realm, problems);
  if (typeof options.apiId !== "string" || options.apiId === "") {
    problems.push({ at: "apiId", message: "must name an API (or give policies, or a stored route)" });
    return undefined;
  }
  const keyauth = compileKeyRequirement(
    {
      keyspaces: [options.apiId],
      ...defined({ permissionQuery: options.permissions, ratelimits: options.ratelimits, credits: options.credits?.cost }),
      locations: [keyLocation(options.key)],
    },
    realm,
    "",
    problems,
  );
  if (keyauth === undefined) return undefined;
  return { kind: "policies", route: accessRoute(realm, [keyauth], options.apiId, tags) };
}

const validatePolicies = new Ajv({ allErrors: true, allowUnionTypes: true, strict: false }).compile<PolicyBody[]>(POLICY_LIST);

/** `policies` checked as keygate.createRoute checks them (their schema, then the gateway's compiler). */
function compilePolicyList(options: KeygateRouteOptions, realm: string, problems: Problems): CompiledRouteOptions | undefined {
  if (!validatePolicies(options.policies)) {
    for (const issue of toValidationIssues(validatePolicies.errors ?? [], "policies"))
      problems.push({ at: issue.location, message: issue.message });
    return undefined;
  }
  let inputs: PolicyInput[];
  try {
    inputs = policiesFromWire(options.policies as PolicyBody[], "policies");
  } catch (error) {
    if (!(error instanceof KeygateError)) throw error;
    for (const issue of error.errors ?? []) problems.push({ at: issue.location, message: issue.message });
    return undefined;
  }
  // A policy's id names it in analytics; the name is unique within the route.
  const policies = compilePolicies(
    inputs.map((policy) => ({ ...policy, id: policy.name })),
    realm,
    "policies",
    problems,
  );
  if (problems.length > 0) return undefined;
  const firstKeyauth = policies.find((policy) => policy.kind === "keyauth");
  const workspaceApiId = options.apiId ?? firstKeyauth?.keyspaces.values().next().value;
  // Every request of a route whose workspace is unknown would be refused.
  if (workspaceApiId === undefined) {
    problems.push({ at: "apiId", message: "must name the API whose workspace the route serves when no keyauth policy does" });
    return undefined;
  }
  return { kind: "policies", route: accessRoute(realm, policies, workspaceApiId, options.tags) };
}

/** The policies of a Fastify route, as the access phase reads a route; `realm` names it. */
function accessRoute(
  realm: string,
  policies: CompiledPolicy[],
  workspaceApiId: string | undefined,
  tags: readonly string[] | undefined,
): AccessRoute {
  const route: AccessRoute = {
    id: realm,
    name: realm,
    policies,
    keySources: policies.flatMap((policy) => (policy.kind === "keyauth" ? policy.keySources : [])),
    workspaceApiId,
    definition: {},
    cors: policies.filter((policy) => policy.kind === "cors"),
    ...defined({ tags }),
  };
  return route;
}

/** The compiler names a policy's fields; the route options call its permission query `permissions`. */
function fieldName(at: string): string {
  const field = at.replace(/^\./, "");
  return field === "permissionQuery" ? "permissions" : field;
}
