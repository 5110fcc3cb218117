import { trustProxyProblems } from "../gateway/client-address.js";
import { RouteTable, RouteTableError } from "../gateway/route-table.js";
import { isManagementPath } from "../http/request-target.js";
import { hashKey } from "../lib/hash.js";
import { ipEntryProblem } from "../lib/ip-allowlist.js";
import { allowanceEntryProblem } from "../lib/private-addresses.js";
import type { KeygateConfig } from "./schema.js";

/**
 * Rules a schema cannot express: one of key/hash, unique root keys and API ids, a 32-byte vault key, a ClickHouse
 * URL for the clickhouse engine, a batch no larger than the buffer, pairs of settings that would make a feature
 * inert (inertPairs), proxies given as addresses, valid routes.
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
  problems.push(...inertPairs(config));
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
  if (isManagementPath(config.gateway.forwardAuth.path)) {
    problems.push(`gateway.forwardAuth.path: '${config.gateway.forwardAuth.path}' is the management API's (/v2)`);
  }
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

const HOUR_MS = 3_600_000;

/** The time a webhook lease needs besides one attempt: reading the queue and writing its records. */
export const WEBHOOK_LEASE_MARGIN_MS = 1_000;

/**
 * Pairs of settings whose values together would make a feature do nothing, silently: each message names both
 * fields and says what would happen.
 */
function inertPairs(config: KeygateConfig): string[] {
  const problems: string[] = [];
  const hook = config.webhooks;
  if (hook.leaseMs < hook.timeoutMs + WEBHOOK_LEASE_MARGIN_MS) {
    problems.push(
      `webhooks.leaseMs: (${hook.leaseMs}) must be at least webhooks.timeoutMs (${hook.timeoutMs}) plus ${WEBHOOK_LEASE_MARGIN_MS} ms: no attempt starts later than leaseMs - timeoutMs into a lease, so nothing would be delivered`,
    );
  }
  if (hook.retryDelayMs > hook.maxRetryDelayMs) {
    problems.push(
      `webhooks.retryDelayMs: (${hook.retryDelayMs}) must not be longer than webhooks.maxRetryDelayMs (${hook.maxRetryDelayMs}), which caps every retry delay`,
    );
  }
  if (hook.giveUpAfterMs <= hook.timeoutMs) {
    problems.push(
      `webhooks.giveUpAfterMs: (${hook.giveUpAfterMs}) must be longer than webhooks.timeoutMs (${hook.timeoutMs}): a delivery whose first attempt timed out would be given up without a retry`,
    );
  }
  if (hook.retryDelayMs >= hook.giveUpAfterMs) {
    problems.push(
      `webhooks.retryDelayMs: (${hook.retryDelayMs}) must be shorter than webhooks.giveUpAfterMs (${hook.giveUpAfterMs}): a failed delivery would be retried only once it is past its give-up time`,
    );
  }
  if (hook.expiringScanIntervalMs > hook.expiringLeadMs) {
    problems.push(
      `webhooks.expiringScanIntervalMs: (${hook.expiringScanIntervalMs}) must not be longer than webhooks.expiringLeadMs (${hook.expiringLeadMs}): a key expiring between two scans' windows would never be told of`,
    );
  }
  if (hook.usageCorrectionWindowMs > 0 && hook.usageCorrectionWindowMs < HOUR_MS) {
    problems.push(
      `webhooks.usageCorrectionWindowMs: (${hook.usageCorrectionWindowMs}) must be 0 (off) or at least an hour, the shortest usage period: a period is read again only when it fits in the window whole, so no usage.corrected would ever be sent`,
    );
  }
  const analytics = config.analytics;
  if (analytics.engine === "clickhouse" && analytics.clickhouse.requestTimeoutMs <= analytics.query.maxExecutionMs) {
    problems.push(
      `analytics.clickhouse.requestTimeoutMs: (${analytics.clickhouse.requestTimeoutMs}) must be longer than analytics.query.maxExecutionMs (${analytics.query.maxExecutionMs}): a long query would be cut off as an unreachable server rather than refused as too slow`,
    );
  }
  const redis = config.storage.redis;
  if (redis?.waitForReplicas !== undefined && redis.waitForReplicas.timeoutMs >= redis.commandTimeoutMs) {
    problems.push(
      `storage.redis.waitForReplicas.timeoutMs: (${redis.waitForReplicas.timeoutMs}) must be shorter than storage.redis.commandTimeoutMs (${redis.commandTimeoutMs}): the WAIT for replicas is a Redis command, cut off at that deadline, so a slow replica would fail the write as Redis not answering`,
    );
  }
  const metricsPort = config.metrics.port;
  if (metricsPort !== undefined && metricsPort !== 0 && metricsPort === config.server.port) {
    problems.push(`metrics.port: (${metricsPort}) must differ from server.port, or be left out to serve /metrics on the main port`);
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
