import { KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { Semaphore } from "../../lib/semaphore.js";
import type { AnalyticsQuotaStore, ApiStore, QuotaUsage } from "../../storage/interfaces.js";
import type { Caller } from "../caller.js";
import { requireApi, requireRatelimit } from "../root-keys/permissions.js";
import type { AnalyticsSinks } from "./events.js";
import type { AnalyticsQueryEngine } from "./query-engine.js";
import { type ParsedQuery, QueryGuard, type QueryLimits } from "./query-guard.js";
import {
  GATEWAY_REQUEST_TABLES,
  RATELIMIT_TABLES,
  type RetentionDays,
  TABLE_FAMILIES,
  type TableFamily,
  VERIFICATION_TABLES,
} from "./tables.js";

export interface QuotaLimits extends QuotaUsage {
  windowMs: number;
}

export interface AnalyticsServiceOptions {
  /** undefined when analytics is off: getVerifications answers 412. */
  engine: AnalyticsQueryEngine | undefined;
  /** Where events go (counting, dropping sinks when analytics is off). */
  sinks: AnalyticsSinks;
  apis: ApiStore;
  quota: AnalyticsQuotaStore;
  clock: Clock;
  limits: QueryLimits & { maxConcurrent: number };
  quotaLimits: QuotaLimits;
  retentionDays: RetentionDays;
}

export type AnalyticsRow = Record<string, unknown>;

const READ_ANALYTICS_MISSING = "Missing one of these permissions: 'api.*.read_analytics' or 'api.<apiId>.read_analytics'.";
const READ_RATELIMIT_ANALYTICS_MISSING =
  "Missing one of these permissions: 'ratelimit.*.read_analytics' or 'ratelimit.<namespaceId>.read_analytics'.";

/**
 * The analytics procedures: customers' SQL over the tables of verifications, rate limit decisions and gateway
 * requests, each confined to the caller's workspace and to what its root key may read; and the event sinks.
 */
export class AnalyticsService {
  /** Verification, rate limiting and the gateway record their events here (see events.ts). */
  readonly sinks: AnalyticsSinks;

  private readonly engine: AnalyticsQueryEngine | undefined;
  private readonly guards: Map<TableFamily, QueryGuard>;
  private readonly apis: ApiStore;
  private readonly quota: AnalyticsQuotaStore;
  private readonly clock: Clock;
  private readonly quotaLimits: QuotaLimits;
  private readonly slots: Semaphore;

  constructor(options: AnalyticsServiceOptions) {
    this.sinks = options.sinks;
    this.engine = options.engine;
    const engine = options.engine;
    this.guards = new Map(
      engine
        ? TABLE_FAMILIES.map((family) => [family, new QueryGuard(engine.database, options.limits, options.retentionDays, family)])
        : [],
    );
    this.apis = options.apis;
    this.quota = options.quota;
    this.clock = options.clock;
    this.quotaLimits = options.quotaLimits;
    this.slots = new Semaphore(options.limits.maxConcurrent);
  }

  /**
   * analytics.getVerifications: the whole workspace with `api.*.read_analytics`, else the key spaces of the APIs it
   * holds `api.<apiId>.read_analytics` for. A key space the query names must exist and be readable.
   */
  async getVerifications(caller: Caller, input: { query: string }): Promise<AnalyticsRow[]> {
    const apiIds = this.readableApis(caller);
    // A deleted API's history stays readable to whoever may read that API's analytics, as with the wildcard.
    const keySpaceIds =
      apiIds &&
      (await Promise.all(apiIds.map((apiId) => this.apis.get(caller.workspaceId, apiId)))).flatMap((api) => (api ? [api.keySpaceId] : []));
    return this.query(caller, VERIFICATION_TABLES, input.query, keySpaceIds, (parsed) =>
      this.checkKeySpaces(caller, parsed.keySpaceLiterals),
    );
  }

  /**
   * analytics.getRatelimits: the whole workspace with `ratelimit.*.read_analytics`, else the namespaces it holds
   * `ratelimit.<namespaceId>.read_analytics` for (a namespace the query names beyond them reads nothing).
   */
  getRatelimits(caller: Caller, input: { query: string }): Promise<AnalyticsRow[]> {
    let namespaceIds: string[] | undefined;
    if (!caller.can(requireRatelimit("read_analytics"))) {
      namespaceIds = caller.namedResourceIds("ratelimit").filter((id) => caller.can(requireRatelimit("read_analytics", id)));
      if (namespaceIds.length === 0)
        throw new KeygateError("err:unkey:authorization:insufficient_permissions", READ_RATELIMIT_ANALYTICS_MISSING);
    }
    return this.query(caller, RATELIMIT_TABLES, input.query, namespaceIds);
  }

  /** analytics.getGatewayRequests: the routes of the APIs the caller may read analytics of, as getVerifications. */
  getGatewayRequests(caller: Caller, input: { query: string }): Promise<AnalyticsRow[]> {
    return this.query(caller, GATEWAY_REQUEST_TABLES, input.query, this.readableApis(caller));
  }

  /** undefined with `api.*.read_analytics`; else the APIs named in `api.<apiId>.read_analytics` (403 when none). */
  private readableApis(caller: Caller): string[] | undefined {
    if (caller.can(requireApi("read_analytics"))) return undefined;
    const apiIds = caller.namedResourceIds("api").filter((apiId) => caller.can(requireApi("read_analytics", apiId)));
    if (apiIds.length === 0) throw new KeygateError("err:unkey:authorization:insufficient_permissions", READ_ANALYTICS_MISSING);
    return apiIds;
  }

  /** Runs a customer's SQL over `family`'s tables, within the workspace and `scopeIds`, the quota and the slots. */
  private async query(
    caller: Caller,
    family: TableFamily,
    query: string,
    scopeIds: readonly string[] | undefined,
    checkParsed: (parsed: ParsedQuery) => Promise<void> = async () => {},
  ): Promise<AnalyticsRow[]> {
    const guard = this.guards.get(family);
    const engine = this.engine;
    if (!guard || !engine)
      throw new KeygateError(
        "err:unkey:data:analytics_not_configured",
        "Analytics is turned off on this keygate (analytics.engine is 'off').",
      );
    const windowStart = this.windowStart();
    await this.takeQuota(caller.workspaceId, windowStart);

    return this.slots.run(async () => {
      const started = this.clock.now();
      try {
        return await engine
          .withConnection(async (connection) => {
            const parsed = await guard.parse(connection, query);
            await checkParsed(parsed);
            const statement = await guard.confine(connection, parsed, { workspaceId: caller.workspaceId, scopeIds }, this.clock.now());
            return guard.run(connection, statement);
          })
          .catch((error: unknown) => {
            throw guard.failure(error);
          });
      } finally {
        const elapsed = this.clock.now() - started;
        // Best effort: a failure to account time must not turn an answered query into an error.
        await this.quota.addExecutionMs(caller.workspaceId, windowStart, this.quotaLimits.windowMs, elapsed).catch(() => {});
      }
    });
  }

  /** A key space the query names must exist in the workspace (404) and belong to an API the caller may read (403). */
  private async checkKeySpaces(caller: Caller, keySpaceIds: readonly string[]): Promise<void> {
    for (const keySpaceId of keySpaceIds) {
      const api = await this.apis.findByKeySpace(caller.workspaceId, keySpaceId);
      if (!api)
        throw new KeygateError("err:unkey:data:key_space_not_found", `The key space '${keySpaceId}' does not exist in this workspace.`);
      caller.authorize(requireApi("read_analytics", api.id));
    }
  }

  private async takeQuota(workspaceId: string, windowStart: number): Promise<void> {
    const { windowMs, queries, executionMs } = this.quotaLimits;
    const { allowed, usage } = await this.quota.acquire(workspaceId, windowStart, windowMs, { queries, executionMs });
    if (allowed) return;
    const retryAfterSeconds = Math.max(1, Math.ceil((windowStart + windowMs - this.clock.now()) / 1000));
    const what = usage.queries >= queries ? `${queries} queries` : `${executionMs} ms of query time`;
    throw new KeygateError(
      "err:user:too_many_requests:query_quota_exceeded",
      `The workspace used its analytics quota of ${what} per ${windowMs} ms; try again in ${retryAfterSeconds} s.`,
      {
        headers: { "retry-after": String(retryAfterSeconds) },
      },
    );
  }

  private windowStart(): number {
    const now = this.clock.now();
    return now - (now % this.quotaLimits.windowMs);
  }
}
