import { defined } from "../lib/defined.js";
import { ConfigError } from "./config-error.js";
import { DEFAULTS } from "./defaults.js";

/** The configuration as read from the file, before the environment overrides it and the schema validates it. */
export type RawConfig = Record<string, unknown>;

/** Variables that set one field each: [variable, section.field, kind]. */
const SIMPLE_VARIABLES: readonly [string, string, "text" | "whole number" | "whole number or text"][] = [
  ["PORT", "server.port", "whole number"],
  ["KEYGATE_WORKERS", "server.workers", "whole number or text"],
  ["HOST", "server.host", "text"],
  ["KEYGATE_TLS_CERT", "server.tls.cert", "text"],
  ["KEYGATE_TLS_KEY", "server.tls.key", "text"],
  ["KEYGATE_TLS_CA", "server.tls.ca", "text"],
  ["METRICS_PORT", "metrics.port", "whole number"],
  ["METRICS_TOKEN", "metrics.token", "text"],
  ["KEYGATE_ANALYTICS_ENGINE", "analytics.engine", "text"],
  ["KEYGATE_ANALYTICS_PATH", "analytics.path", "text"],
  ["KEYGATE_CLICKHOUSE_URL", "analytics.clickhouse.url", "text"],
  ["KEYGATE_CLICKHOUSE_USERNAME", "analytics.clickhouse.username", "text"],
  ["KEYGATE_CLICKHOUSE_PASSWORD", "analytics.clickhouse.password", "text"],
  ["KEYGATE_VAULT_KEY", "vault.key", "text"],
];

/**
 * The variables above, REDIS_URL (or REDIS_CLUSTER_NODES, or REDIS_SENTINELS with REDIS_SENTINEL_NAME),
 * KEYGATE_REDIS_PREFIX and KEYGATE_ROOT_KEY override the file. Returns which config paths came from which
 * variable, so a validation message can name the variable the user actually set.
 */
export function applyEnvironment(raw: RawConfig, env: Record<string, string | undefined>, source: string): Map<string, string> {
  const fromEnv = new Map<string, string>();
  // The object at a path of sections (server, or server.tls), made empty where the file has none.
  const section = (path: string): RawConfig => {
    let object = raw;
    const names = path.split(".");
    names.forEach((name, index) => {
      const current = object[name];
      if (current === undefined || current === null) object[name] = {};
      else if (typeof current !== "object" || Array.isArray(current))
        throw new ConfigError(source, [`${names.slice(0, index + 1).join(".")}: must be an object`]);
      object = object[name] as RawConfig;
    });
    return object;
  };

  for (const [variable, path, kind] of SIMPLE_VARIABLES) {
    const value = nonEmpty(env[variable]);
    if (value === undefined) continue;
    if (kind === "whole number" && !/^\d+$/.test(value))
      throw new ConfigError("environment", [`${variable}: must be a whole number, got '${value}'`]);
    const at = path.lastIndexOf(".");
    section(path.slice(0, at))[path.slice(at + 1)] =
      kind === "whole number" || (kind === "whole number or text" && /^\d+$/.test(value)) ? Number(value) : value;
    fromEnv.set(path, variable);
  }
  const redisForm = redisFromEnvironment(env);
  if (redisForm !== undefined) {
    const storage = section("storage");
    const {
      url: _url,
      cluster: _cluster,
      sentinel,
      ...settings
    } = storage.redis && typeof storage.redis === "object" ? (storage.redis as RawConfig) : {};
    // A form from the environment replaces the file's form; a sentinel list without a name keeps the file's name.
    const form = redisForm.form;
    if (form.sentinel && form.sentinel.name === undefined) {
      const fileName = sentinel && typeof sentinel === "object" ? (sentinel as RawConfig).name : undefined;
      if (fileName === undefined)
        throw new ConfigError("environment", [
          "REDIS_SENTINELS: needs REDIS_SENTINEL_NAME (or storage.redis.sentinel.name in the file) too",
        ]);
      form.sentinel.name = fileName;
    }
    storage.redis = { ...settings, ...form };
    for (const [path, variable] of redisForm.paths) fromEnv.set(path, variable);
  }
  const redisPrefix = nonEmpty(env.KEYGATE_REDIS_PREFIX);
  if (redisPrefix !== undefined) {
    const storage = section("storage");
    // A prefix alone would read as "storage.redis.url is required"; say which variable is missing its partner.
    if (!storage.redis || typeof storage.redis !== "object") {
      throw new ConfigError("environment", [
        "KEYGATE_REDIS_PREFIX: needs a Redis store; set REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS (or storage.redis in the file) too",
      ]);
    }
    storage.redis = { ...(storage.redis as RawConfig), prefix: redisPrefix };
    fromEnv.set("storage.redis.prefix", "KEYGATE_REDIS_PREFIX");
  }
  const rootKey = nonEmpty(env.KEYGATE_ROOT_KEY);
  if (rootKey !== undefined) {
    const rootKeys = Array.isArray(raw.rootKeys) ? raw.rootKeys : [];
    raw.rootKeys = [
      ...rootKeys,
      { key: rootKey, name: "KEYGATE_ROOT_KEY", workspaceId: DEFAULTS.bootstrapWorkspaceId, permissions: ["*"] },
    ];
    fromEnv.set(`rootKeys[${rootKeys.length}]`, "KEYGATE_ROOT_KEY");
  }
  return fromEnv;
}

/**
 * The Redis form the environment names: REDIS_URL, REDIS_CLUSTER_NODES (comma-separated URLs), or REDIS_SENTINELS
 * (comma-separated URLs) with REDIS_SENTINEL_NAME. At most one form may be set.
 */
function redisFromEnvironment(env: Record<string, string | undefined>): { form: RawRedisForm; paths: [string, string][] } | undefined {
  const url = nonEmpty(env.REDIS_URL);
  const clusterNodes = nonEmpty(env.REDIS_CLUSTER_NODES);
  const sentinels = nonEmpty(env.REDIS_SENTINELS);
  const sentinelName = nonEmpty(env.REDIS_SENTINEL_NAME);
  const given = [url && "REDIS_URL", clusterNodes && "REDIS_CLUSTER_NODES", (sentinels || sentinelName) && "REDIS_SENTINELS"].filter(
    Boolean,
  );
  if (given.length > 1) throw new ConfigError("environment", [`${given.join(" and ")}: set only one Redis form`]);
  const list = (text: string) =>
    text
      .split(",")
      .map((item) => item.trim())
      .filter((item) => item !== "");
  if (url !== undefined) return { form: { url }, paths: [["storage.redis.url", "REDIS_URL"]] };
  if (clusterNodes !== undefined)
    return { form: { cluster: { nodes: list(clusterNodes) } }, paths: [["storage.redis.cluster.nodes", "REDIS_CLUSTER_NODES"]] };
  if (sentinels === undefined && sentinelName !== undefined) {
    throw new ConfigError("environment", ["REDIS_SENTINEL_NAME: needs REDIS_SENTINELS (the sentinels' URLs, comma-separated) too"]);
  }
  if (sentinels === undefined) return undefined;
  return {
    form: { sentinel: { sentinels: list(sentinels), ...defined({ name: sentinelName }) } },
    paths: [
      ["storage.redis.sentinel.sentinels", "REDIS_SENTINELS"],
      ["storage.redis.sentinel.name", "REDIS_SENTINEL_NAME"],
    ],
  };
}

type RawRedisForm = { url?: string; cluster?: { nodes: string[] }; sentinel?: { sentinels: string[]; name?: unknown } };

/** A variable's value, trimmed; unset and blank are the same: not given. */
export function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}
