import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { Ajv } from "ajv";
import { parseDocument } from "yaml";
import { trustProxyProblems } from "../gateway/client-address.js";
import { RouteTable, RouteTableError } from "../gateway/route-table.js";
import { toValidationIssues } from "../http/validation-issues.js";
import { deepFreeze } from "../lib/freeze.js";
import { hashKey } from "../lib/hash.js";
import { ipEntryProblem } from "../lib/ip-allowlist.js";
import { DEFAULTS } from "./defaults.js";
import { ConfigSchema, type KeygateConfig } from "./schema.js";

/** The file read when KEYGATE_CONFIG is not set, if it exists. */
export const DEFAULT_CONFIG_PATH = "config/keygate.yaml";

/** An invalid configuration. Each problem names the path in the file (or the environment variable) at fault. */
export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(source: string, problems: string[]) {
    super(`invalid configuration (${source}):\n${problems.map((problem) => `  - ${problem}`).join("\n")}`);
    this.name = "ConfigError";
    this.problems = problems;
  }
}

export interface LoadConfigOptions {
  env?: Record<string, string | undefined>;
  cwd?: string;
}

type RawConfig = Record<string, unknown>;

/**
 * Reads the YAML file (KEYGATE_CONFIG, else config/keygate.yaml when present, else nothing), applies the
 * environment overrides, validates, fills defaults and freezes. Throws ConfigError; never returns a bad config.
 */
export function loadConfig(options: LoadConfigOptions = {}): KeygateConfig {
  const env = options.env ?? process.env;
  const explicit = nonEmpty(env.KEYGATE_CONFIG);
  const path = configPath(options);
  if (explicit && !existsSync(path as string)) {
    throw new ConfigError("KEYGATE_CONFIG", [`KEYGATE_CONFIG: file not found: ${path}`]);
  }
  const source = path ?? "defaults and environment";
  const raw = path ? readYaml(path) : {};
  const fromEnv = applyEnvironment(raw, env, source);
  return validateConfig(raw, source, fromEnv);
}

/** The configuration file loadConfig reads: KEYGATE_CONFIG, else config/keygate.yaml when present, else none. */
export function configPath(options: LoadConfigOptions = {}): string | undefined {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const explicit = nonEmpty(env.KEYGATE_CONFIG);
  if (explicit) return resolve(cwd, explicit);
  const fallback = resolve(cwd, DEFAULT_CONFIG_PATH);
  return existsSync(fallback) ? fallback : undefined;
}

/** Validates an already parsed configuration object (used by loadConfig, tests and the CLI). */
export function validateConfig(raw: unknown, source = "configuration", fromEnv: ReadonlyMap<string, string> = new Map()): KeygateConfig {
  const config = structuredClone(raw ?? {});
  if (!validate(config)) {
    const problems = toValidationIssues(validate.errors ?? [], "").map((issue) => {
      const variable = [...fromEnv].find(([path]) => issue.location === path || issue.location.startsWith(`${path}.`));
      return `${issue.location || "(top level)"}${variable ? ` (from ${variable[1]})` : ""}: ${issue.message}`;
    });
    throw new ConfigError(source, problems);
  }
  const problems = checkConsistency(config);
  if (problems.length > 0) throw new ConfigError(source, problems);
  return deepFreeze(config);
}

const validate = new Ajv({ allErrors: true, useDefaults: true, allowUnionTypes: true, strict: false }).compile<KeygateConfig>(ConfigSchema);

function readYaml(path: string): RawConfig {
  const text = readFileSync(path, "utf8");
  const document = parseDocument(text);
  if (document.errors.length > 0) {
    throw new ConfigError(
      path,
      document.errors.map((error) => {
        const where = error.linePos?.[0];
        // With line positions known, the message's own trailing " at line L, column C:" would repeat them.
        const message = (error.message.split("\n")[0] as string).replace(/ at line \d+, column \d+:?$/, "");
        return `${where ? `line ${where.line}, column ${where.col}: ` : ""}${message}`;
      }),
    );
  }
  const value: unknown = document.toJS();
  if (value === null || value === undefined) return {};
  if (typeof value !== "object" || Array.isArray(value)) {
    throw new ConfigError(path, ["(top level): must be a mapping of sections (server, storage, ...)"]);
  }
  // A section left with only comments under it (`vault:`) parses as null; it means "use the defaults".
  return Object.fromEntries(Object.entries(value).filter(([, section]) => section !== null));
}

/** Variables that set one field each: [variable, section.field, kind]. */
const SIMPLE_VARIABLES: readonly [string, string, "text" | "whole number" | "whole number or text"][] = [
  ["PORT", "server.port", "whole number"],
  ["KEYGATE_WORKERS", "server.workers", "whole number or text"],
  ["HOST", "server.host", "text"],
  ["METRICS_PORT", "metrics.port", "whole number"],
  ["METRICS_TOKEN", "metrics.token", "text"],
  ["KEYGATE_ANALYTICS_ENGINE", "analytics.engine", "text"],
  ["KEYGATE_ANALYTICS_PATH", "analytics.path", "text"],
  ["KEYGATE_VAULT_KEY", "vault.key", "text"],
];

/**
 * The variables above, REDIS_URL (or REDIS_CLUSTER_NODES, or REDIS_SENTINELS with REDIS_SENTINEL_NAME),
 * KEYGATE_REDIS_PREFIX and KEYGATE_ROOT_KEY override the file. Returns which config paths came from which
 * variable, so a validation message can name the variable the user actually set.
 */
function applyEnvironment(raw: RawConfig, env: Record<string, string | undefined>, source: string): Map<string, string> {
  const fromEnv = new Map<string, string>();
  const section = (name: string): RawConfig => {
    const current = raw[name];
    if (current === undefined || current === null) raw[name] = {};
    else if (typeof current !== "object" || Array.isArray(current)) throw new ConfigError(source, [`${name}: must be an object`]);
    return raw[name] as RawConfig;
  };

  for (const [variable, path, kind] of SIMPLE_VARIABLES) {
    const value = nonEmpty(env[variable]);
    if (value === undefined) continue;
    if (kind === "whole number" && !/^\d+$/.test(value))
      throw new ConfigError("environment", [`${variable}: must be a whole number, got '${value}'`]);
    const [name, field] = path.split(".") as [string, string];
    section(name)[field] = kind === "whole number" || (kind === "whole number or text" && /^\d+$/.test(value)) ? Number(value) : value;
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
 * Rules a schema cannot express: one of key/hash, unique root keys and API ids, a 32-byte vault key, a ClickHouse
 * URL for the clickhouse engine, a batch no larger than the buffer, proxies given as addresses, valid routes.
 */
function checkConsistency(config: KeygateConfig): string[] {
  const problems: string[] = [];
  const hashes = new Map<string, number>();
  config.rootKeys.forEach((rootKey, index) => {
    if ((rootKey.key === undefined) === (rootKey.hash === undefined)) {
      problems.push(`rootKeys[${index}]: give exactly one of 'key' or 'hash'`);
      return;
    }
    const hash = rootKey.hash ?? hashKey(rootKey.key as string);
    const earlier = hashes.get(hash);
    if (earlier !== undefined) problems.push(`rootKeys[${index}]: the same root key as rootKeys[${earlier}]`);
    hashes.set(hash, index);
  });
  const apiIds = new Map<string, number>();
  config.apis.forEach((api, index) => {
    const earlier = apiIds.get(api.id);
    if (earlier !== undefined) problems.push(`apis[${index}].id: '${api.id}' is declared twice (also apis[${earlier}])`);
    apiIds.set(api.id, index);
    (api.ipAllowlist ?? []).forEach((entry, position) => {
      const problem = ipEntryProblem(entry);
      if (problem !== undefined) problems.push(`apis[${index}].ipAllowlist[${position}]: '${entry}' ${problem}`);
    });
  });
  const migrationIds = new Map<string, number>();
  config.migrations.forEach((migration, index) => {
    const id = `${migration.workspaceId}\u0000${migration.id}`;
    const earlier = migrationIds.get(id);
    if (earlier !== undefined)
      problems.push(
        `migrations[${index}].id: '${migration.id}' is declared twice for workspace ${migration.workspaceId} (also migrations[${earlier}])`,
      );
    migrationIds.set(id, index);
  });
  if (config.vault.key !== undefined && Buffer.from(config.vault.key, "base64").length !== 32) {
    problems.push("vault.key: must be 32 bytes encoded as base64 (e.g. `openssl rand -base64 32`)");
  }
  if (config.analytics.engine === "clickhouse" && config.analytics.clickhouse.url === undefined) {
    problems.push("analytics.clickhouse.url: is required when analytics.engine is 'clickhouse'");
  }
  const dashboardPath = config.dashboard.path;
  if (dashboardPath === "/v2" || dashboardPath.startsWith("/v2/") || dashboardPath === "/metrics") {
    problems.push(`dashboard.path: '${dashboardPath}' is taken by keygate's own routes; choose another (e.g. /dashboard)`);
  }
  if (config.dashboard.sessionIdleTimeoutMs > config.dashboard.sessionAbsoluteTimeoutMs) {
    problems.push("dashboard.sessionIdleTimeoutMs: must not be longer than dashboard.sessionAbsoluteTimeoutMs");
  }
  if (config.analytics.buffer.batchSize > config.analytics.buffer.maxEvents) {
    problems.push("analytics.buffer.batchSize: must not be larger than analytics.buffer.maxEvents");
  }
  const { workers } = config.server;
  if (workers !== "auto" && !(Number.isInteger(workers) && workers >= 1 && workers <= 256)) {
    problems.push(`server.workers: must be a whole number from 1 to 256, or auto (one per core); got '${workers}'`);
  } else if (typeof workers === "number" && workers > 1 && config.storage.redis === undefined) {
    problems.push(
      "server.workers: more than one worker needs Redis stores (storage.redis or REDIS_URL): in-memory stores would be one per process, with limits, keys and credits apart",
    );
  }
  problems.push(...redisProblems(config.storage.redis));
  problems.push(...trustProxyProblems(config.gateway.trustProxy));
  try {
    RouteTable.compile(config.routes);
  } catch (error) {
    if (!(error instanceof RouteTableError)) throw error;
    problems.push(...error.problems);
  }
  return problems;
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
    form: { sentinel: { sentinels: list(sentinels), ...(sentinelName !== undefined ? { name: sentinelName } : {}) } },
    paths: [
      ["storage.redis.sentinel.sentinels", "REDIS_SENTINELS"],
      ["storage.redis.sentinel.name", "REDIS_SENTINEL_NAME"],
    ],
  };
}

type RawRedisForm = { url?: string; cluster?: { nodes: string[] }; sentinel?: { sentinels: string[]; name?: unknown } };

/** Exactly one Redis form; URLs of one deployment share their credentials and scheme; only a single server has databases. */
function redisProblems(redis: KeygateConfig["storage"]["redis"]): string[] {
  if (redis === undefined) return [];
  const forms = (["url", "cluster", "sentinel"] as const).filter((form) => redis[form] !== undefined);
  if (forms.length !== 1) {
    return [
      `storage.redis: give exactly one of 'url', 'cluster' or 'sentinel'${forms.length > 1 ? ` (found ${forms.map((form) => `'${form}'`).join(" and ")})` : ""}`,
    ];
  }
  const problems: string[] = [];
  const checkGroup = (path: string, urls: readonly string[]) => {
    const access = (url: string) => {
      const parsed = new URL(url);
      return `${parsed.protocol}${parsed.username}:${parsed.password}`;
    };
    for (const [index, url] of urls.entries()) {
      if (!URL.canParse(url)) {
        problems.push(`${path}[${index}]: is not a URL`);
        continue;
      }
      const parsed = new URL(url);
      if (parsed.pathname !== "" && parsed.pathname !== "/")
        problems.push(
          `${path}[${index}]: names a database ('${parsed.pathname.slice(1)}'); a Redis Cluster or Sentinel setup serves database 0 only`,
        );
      if (urls[0] !== undefined && URL.canParse(urls[0]) && access(url) !== access(urls[0]))
        problems.push(`${path}[${index}]: must use the same scheme, user name and password as ${path}[0]`);
    }
  };
  if (redis.cluster) checkGroup("storage.redis.cluster.nodes", redis.cluster.nodes);
  if (redis.sentinel) checkGroup("storage.redis.sentinel.sentinels", redis.sentinel.sentinels);
  return problems;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}
