import { trustProxyProblems } from "../gateway/client-address.js";
import { RouteTable, RouteTableError } from "../gateway/route-table.js";
import { hashKey } from "../lib/hash.js";
import { ipEntryProblem } from "../lib/ip-allowlist.js";
import { allowanceEntryProblem } from "../lib/private-addresses.js";
import type { KeygateConfig } from "./schema.js";

/**
 * Rules a schema cannot express: one of key/hash, unique root keys and API ids, a 32-byte vault key, a ClickHouse
 * URL for the clickhouse engine, a batch no larger than the buffer, proxies given as addresses, valid routes.
 */
export function checkConsistency(config: KeygateConfig): string[] {
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
  config.gateway.apiRoutes.allowedUpstreams.forEach((entry, index) => {
    const problem = allowanceEntryProblem(entry);
    if (problem !== undefined) problems.push(`gateway.apiRoutes.allowedUpstreams[${index}]: '${entry}' ${problem}`);
  });
  try {
    RouteTable.compile(config.routes);
  } catch (error) {
    if (!(error instanceof RouteTableError)) throw error;
    problems.push(...error.problems);
  }
  return problems;
}

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
