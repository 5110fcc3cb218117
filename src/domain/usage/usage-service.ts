import { invalidAt, KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { defined } from "../../lib/defined.js";
import type { ApiStore, IdentityStore, KeyStore } from "../../storage/interfaces.js";
import { AnalyticsEngineError, type AnalyticsQueryEngine } from "../analytics/query-engine.js";
import { DAY_MS } from "../analytics/tables.js";
import type { Caller } from "../caller.js";
import { requireUsage } from "../root-keys/permissions.js";
import { periodCount, periodEnd, periodStart, periodStarts, type UsageGranularity } from "./periods.js";
import { addUsage, emptyUsage, type UsageNumbers } from "./usage-numbers.js";
import { type UsageFilter, UsageQueries } from "./usage-queries.js";

/** Buckets one getUsage answers, at most (about 41 days of hours, 1,000 days, 83 years of months). */
export const MAX_USAGE_BUCKETS = 1_000;

export interface UsageServiceDeps {
  /** undefined when analytics is off: getUsage answers 412. */
  engine: AnalyticsQueryEngine | undefined;
  apis: ApiStore;
  identities: IdentityStore;
  keys: KeyStore;
  clock: Clock;
  /** How long the raw verification table keeps rows (analytics.retentionDays.raw): usage reaches no further back. */
  rawRetentionDays: number;
}

export interface UsageInput {
  apiId?: string;
  /** An identity's id or externalId. */
  identity?: string;
  keyId?: string;
  granularity: UsageGranularity;
  start: number;
  end?: number;
}

export interface UsageBucket extends UsageNumbers {
  start: number;
  end: number;
}

export interface UsageAnswer {
  granularity: UsageGranularity;
  /** The range answered: the request's, widened to whole buckets. */
  start: number;
  end: number;
  buckets: UsageBucket[];
  totals: UsageNumbers;
}

/** keygate.getUsage: what a workspace, an API, an identity or a key used, bucket by bucket, exact. */
export class UsageService {
  private readonly deps: UsageServiceDeps;
  private readonly queries: UsageQueries | undefined;

  constructor(deps: UsageServiceDeps) {
    this.deps = deps;
    this.queries = deps.engine && new UsageQueries(deps.engine);
  }

  async getUsage(caller: Caller, input: UsageInput): Promise<UsageAnswer> {
    caller.authorize(requireUsage("read_usage"));
    const queries = this.queries;
    if (!queries) throw analyticsOff();
    const { granularity } = input;
    const now = this.deps.clock.now();
    const start = periodStart(granularity, input.start);
    const end = periodEnd(granularity, (input.end ?? now + 1) - 1);
    checkRange(input, start, end, now, this.deps.rawRetentionDays);
    const filter = await this.filter(caller.workspaceId, input);
    const found = await queries.buckets(filter, granularity, start, end).catch((error: unknown) => {
      throw engineFailure(error);
    });
    const totals = emptyUsage();
    const buckets = periodStarts(granularity, start, end).map((at): UsageBucket => {
      const numbers = found.get(at) ?? emptyUsage();
      addUsage(totals, numbers);
      return { start: at, end: periodEnd(granularity, at), ...numbers };
    });
    return { granularity, start, end, buckets, totals };
  }

  /** The filter for the subjects named: each must exist in the caller's workspace (404 otherwise, as everywhere). */
  private async filter(workspaceId: string, input: UsageInput): Promise<UsageFilter> {
    let keySpaceId: string | undefined;
    if (input.apiId !== undefined) {
      const api = await this.deps.apis.get(workspaceId, input.apiId);
      if (!api) throw new KeygateError("err:unkey:data:api_not_found", `The API '${input.apiId}' does not exist.`);
      keySpaceId = api.keySpaceId;
    }
    let identityId: string | undefined;
    if (input.identity !== undefined) {
      // A deleted identity's usage stays readable by its id; an externalId names the live identity that has it.
      const identity =
        (await this.deps.identities.get(workspaceId, input.identity)) ??
        (await this.deps.identities.findByExternalId(workspaceId, input.identity));
      if (!identity) throw new KeygateError("err:unkey:data:identity_not_found", `The identity '${input.identity}' does not exist.`);
      identityId = identity.id;
    }
    if (input.keyId !== undefined && !(await this.deps.keys.get(workspaceId, input.keyId)))
      throw new KeygateError("err:unkey:data:key_not_found", `The key '${input.keyId}' does not exist.`);
    return { workspaceId, ...defined({ keySpaceId, identityId, keyId: input.keyId }) };
  }
}

function checkRange(input: UsageInput, start: number, end: number, now: number, rawRetentionDays: number): void {
  if (input.end !== undefined && input.end <= input.start) throw invalidAt("body.end", "must be greater than start");
  const buckets = periodCount(input.granularity, start, end);
  if (buckets > MAX_USAGE_BUCKETS)
    throw invalidAt(
      "body.start",
      `asks for ${buckets} ${input.granularity} buckets; at most ${MAX_USAGE_BUCKETS} are answered at once`,
      "ask for a shorter range or a coarser granularity",
    );
  const cutoff = now - rawRetentionDays * DAY_MS;
  if (start < cutoff)
    throw invalidAt(
      "body.start",
      `is before ${new Date(cutoff).toISOString()}: verifications are kept ${rawRetentionDays} days (analytics.retentionDays.raw)`,
      "ask for a later start",
    );
}

/** An engine that cannot be reached now is a 503 the caller may retry; anything else stays a failure of keygate's. */
export function engineFailure(error: unknown): unknown {
  if (error instanceof AnalyticsEngineError && error.kind === "unavailable")
    return new KeygateError(
      "err:unkey:data:analytics_connection_failed",
      "The analytics engine cannot be reached right now; try again later.",
      {
        cause: error,
      },
    );
  return error;
}

export function analyticsOff(): KeygateError {
  return new KeygateError(
    "err:unkey:data:analytics_not_configured",
    "Analytics is turned off on this keygate (analytics.engine is 'off').",
  );
}
