import { KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { Semaphore } from "../../lib/semaphore.js";
import type { AnalyticsQuotaStore, ApiStore, QuotaUsage } from "../../storage/interfaces.js";
import type { Caller } from "../caller.js";
import { requireApi } from "../root-keys/permissions.js";
import type { AnalyticsSinks } from "./events.js";
import type { AnalyticsQueryEngine } from "./query-engine.js";
import { type Confinement, QueryGuard, type QueryLimits } from "./query-guard.js";
import type { RetentionDays } from "./tables.js";

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

/** analytics.getVerifications and the event sink verification writes to. */
export class AnalyticsService {
  /** Verification, rate limiting and the gateway record their events here (see events.ts). */
  readonly sinks: AnalyticsSinks;

  private readonly engine: AnalyticsQueryEngine | undefined;
  private readonly guard: QueryGuard | undefined;
  private readonly apis: ApiStore;
  private readonly quota: AnalyticsQuotaStore;
  private readonly clock: Clock;
  private readonly quotaLimits: QuotaLimits;
  private readonly slots: Semaphore;

  constructor(options: AnalyticsServiceOptions) {
    this.sinks = options.sinks;
    this.engine = options.engine;
    this.guard = options.engine ? new QueryGuard(options.engine.database, options.limits, options.retentionDays) : undefined;
    this.apis = options.apis;
    this.quota = options.quota;
    this.clock = options.clock;
    this.quotaLimits = options.quotaLimits;
    this.slots = new Semaphore(options.limits.maxConcurrent);
  }

  /**
   * Runs a customer's SQL over the verification tables, confined to the rows the root key may read: the whole
   * workspace with `api.*.read_analytics`, else the APIs it holds `api.<apiId>.read_analytics` for.
   */
  async getVerifications(caller: Caller, input: { query: string }): Promise<AnalyticsRow[]> {
    const confinement = await this.confinementOf(caller);
    const guard = this.guard;
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
            const parsed = await guard.parse(connection, input.query);
            await this.checkKeySpaces(caller, parsed.keySpaceLiterals);
            const statement = await guard.confine(connection, parsed, confinement, this.clock.now());
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

  private async confinementOf(caller: Caller): Promise<Confinement> {
    if (caller.can(requireApi("read_analytics"))) return { workspaceId: caller.workspaceId, keySpaceIds: undefined };
    const apiIds = caller.namedResourceIds("api").filter((apiId) => caller.can(requireApi("read_analytics", apiId)));
    if (apiIds.length === 0) throw new KeygateError("err:unkey:authorization:insufficient_permissions", READ_ANALYTICS_MISSING);
    // A deleted API's history stays readable to whoever may read that API's analytics, as with the wildcard.
    const apis = await Promise.all(apiIds.map((apiId) => this.apis.get(caller.workspaceId, apiId)));
    return { workspaceId: caller.workspaceId, keySpaceIds: apis.flatMap((api) => (api ? [api.keySpaceId] : [])) };
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
