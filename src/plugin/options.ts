import type { AnalyticsSettings } from "../analytics/index.js";
import { ConfigError, validateConfig } from "../config/load.js";
import type { KeygateConfig } from "../config/schema.js";
import type { RedisConfig } from "../config/storage-schema.js";
import { type CompiledKeyauth, compileKeyRequirement } from "../domain/routes/policy-compiler.js";
import type { Problems } from "../domain/routes/problems.js";
import { keyLocation } from "../gateway/config-routes.js";
import type { Clock } from "../lib/clock.js";
import { defined } from "../lib/defined.js";

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
 * A route's protection, in its `config.keygate` (or given to `app.keygate.preHandler`): the fields of a configuration
 * file's gateway route that say what a key must be.
 */
export interface KeygateRouteOptions {
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
}

/** A route's options checked and compiled once, when the route is registered. */
export interface CompiledRouteOptions {
  apiId: string;
  keyauth: CompiledKeyauth;
  tags?: readonly string[];
}

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

/** A route's options compiled as the gateway compiles a keyauth policy; throws naming the route and the field. */
export function compileRouteOptions(options: KeygateRouteOptions, route: string): CompiledRouteOptions {
  const problems: Problems = [];
  if (typeof options?.apiId !== "string" || options.apiId === "") problems.push({ at: "apiId", message: "must name an API" });
  const keyauth =
    problems.length === 0
      ? compileKeyRequirement(
          {
            keyspaces: [options.apiId],
            ...defined({
              permissionQuery: options.permissions,
              ratelimits: options.ratelimits,
              credits: options.credits?.cost,
            }),
            locations: [keyLocation(options.key)],
          },
          route,
          "",
          problems,
        )
      : undefined;
  if (keyauth === undefined || problems.length > 0) {
    const fields = problems.map((problem) => `${fieldName(problem.at)}: ${problem.message}`);
    throw new ConfigError(`keygate options of route ${route}`, fields);
  }
  return { apiId: options.apiId, keyauth, ...defined({ tags: options.tags }) };
}

/** The compiler names a policy's fields; the route options call its permission query `permissions`. */
function fieldName(at: string): string {
  const field = at.replace(/^\./, "");
  return field === "permissionQuery" ? "permissions" : field;
}
