import { KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { newId } from "../../lib/ids.js";
import type { WindowResult } from "../../storage/counter-interfaces.js";
import type { RatelimitNamespaceStore } from "../../storage/interfaces.js";
import type { RatelimitNamespaceRecord } from "../../storage/records.js";
import type { EventSink, RatelimitEvent } from "../analytics/events.js";
import { type AuditTrail, UNAUDITED } from "../audit/audit-trail.js";
import type { Caller } from "../caller.js";
import { type NoticeSink, UNHEARD } from "../notices.js";
import type { RatelimitSource } from "../observer.js";
import { allOf } from "../permissions/query.js";
import { type RatelimitAction, requireRatelimit } from "../root-keys/permissions.js";
import { ExceededNotices } from "./exceeded-notices.js";
import { decided, type NamespaceLimitCheck, type NamespaceLimitDecision } from "./limit-decision.js";
import type { Limiter } from "./limiter.js";
import type { NamespaceDirectory, ResolvedNamespace } from "./namespace-directory.js";
import { applyOverrides, type LimitRequest, missingNames, NamespaceResolver, namespaceNotFound } from "./namespace-resolver.js";
import {
  type ListOverridesInput,
  type NamespaceTarget,
  type OverridesPage,
  type OverrideView,
  overrideChanges,
  overrideNotFound,
  overrideView,
} from "./override-views.js";
import { recordRatelimitDecision } from "./ratelimit-events.js";

export type { NamespaceLimitCheck, NamespaceLimitDecision } from "./limit-decision.js";
export type { LimitRequest } from "./namespace-resolver.js";
export type { ListOverridesInput, NamespaceTarget, OverridesPage, OverrideView } from "./override-views.js";

/** A live namespace as keygate.listRatelimitNamespaces shows it. */
export interface NamespaceView {
  id: string;
  name: string;
  createdAt: number;
}

export interface LimitOutcome {
  /** Every check passed, and all of them were consumed; when false, none was. */
  passed: boolean;
  /** One per request, in order. */
  decisions: NamespaceLimitDecision[];
  /** Unix ms of the decision (the clock the decisions' `resetAt` are on). */
  decidedAt: number;
  /** See LimiterOutcome.degraded: the shared counters were unavailable and `ratelimit.fail` answered. */
  degraded?: "open" | "local";
}

export interface RatelimitServiceOptions {
  namespaces: RatelimitNamespaceStore;
  directory: NamespaceDirectory;
  limiter: Limiter;
  clock: Clock;
  /** Where every decision goes, one event per check (analytics.getRatelimits). */
  events: EventSink<RatelimitEvent>;
  /** Told of a window exceeded (ratelimit.exceeded); nobody by default. */
  notices?: NoticeSink;
  audit?: AuditTrail;
}

/**
 * Namespace rate limiting: limit and multiLimit over the shared counters (all-or-nothing), namespaces created on
 * first use, and per-identifier overrides. `check` is the core without root keys; the methods taking a Caller add
 * the root-key permissions of the /v2 procedures on top. The gateway only `resolve`s its namespace limits: they are
 * decided with the key's own limits by verification. Every decision is recorded, one event per check.
 */
export class RatelimitService {
  private readonly namespaces: RatelimitNamespaceStore;
  private readonly directory: NamespaceDirectory;
  private readonly resolver: NamespaceResolver;
  private readonly limiter: Limiter;
  private readonly clock: Clock;
  private readonly events: EventSink<RatelimitEvent>;
  private readonly exceeded: ExceededNotices;
  private readonly audit: AuditTrail;

  constructor(options: RatelimitServiceOptions) {
    this.namespaces = options.namespaces;
    this.directory = options.directory;
    this.resolver = new NamespaceResolver(options.namespaces, options.directory, options.clock);
    this.limiter = options.limiter;
    this.clock = options.clock;
    this.events = options.events;
    this.exceeded = new ExceededNotices(options.notices ?? UNHEARD);
    this.audit = options.audit ?? UNAUDITED;
  }

  /**
   * Applies every request all-or-nothing within one workspace, overrides included. Unknown namespaces are created
   * when `createMissingNamespaces`, else they are 404; deleted ones are 410. The decision is recorded under
   * `requestId`.
   */
  async check(
    workspaceId: string,
    requests: readonly LimitRequest[],
    options: { createMissingNamespaces: boolean; requestId: string },
  ): Promise<LimitOutcome> {
    const source = requests.length === 1 ? "ratelimit.limit" : "multiLimit";
    const applied = await this.resolve(workspaceId, requests, options);
    return this.decide({ workspaceId, requestId: options.requestId, source }, applied);
  }

  /**
   * The counter checks `requests` become (namespaces found or created as `check` does, overrides applied), without
   * deciding them: the gateway decides them in one step with a key's own limits and credits.
   */
  async resolve(
    workspaceId: string,
    requests: readonly LimitRequest[],
    options: { createMissingNamespaces: boolean },
  ): Promise<NamespaceLimitCheck[]> {
    const resolved = await this.resolver.findAll(workspaceId, requests);
    const missing = missingNames(resolved);
    if (missing.length > 0) {
      if (!options.createMissingNamespaces) throw namespaceNotFound(missing[0] as string);
      await this.resolver.createAll(workspaceId, missing, resolved);
    }
    return applyOverrides(requests, resolved as Map<string, ResolvedNamespace>);
  }

  /** ratelimit.limit: needs `ratelimit.*.limit` or `ratelimit.<namespaceId>.limit`. */
  async limit(caller: Caller, request: LimitRequest, requestId: string): Promise<NamespaceLimitDecision> {
    const outcome = await this.limitAsCaller(caller, [request], { requestId, source: "ratelimit.limit" });
    return outcome.decisions[0] as NamespaceLimitDecision;
  }

  /** ratelimit.multiLimit: all-or-nothing; needs the limit permission for every namespace of the batch. */
  multiLimit(caller: Caller, requests: readonly LimitRequest[], requestId: string): Promise<LimitOutcome> {
    return this.limitAsCaller(caller, requests, { requestId, source: "multiLimit" });
  }

  /** ratelimit.setOverride: an upsert on (namespace, identifier) that keeps the override's id. */
  async setOverride(
    caller: Caller,
    input: NamespaceTarget & { identifier: string; limit: number; durationMs: number },
  ): Promise<{ overrideId: string }> {
    const namespace = await this.liveNamespace(caller, input.namespace, "set_override");
    const now = this.clock.now();
    const before = await this.namespaces.getOverride(caller.workspaceId, namespace.id, input.identifier);
    const stored = await this.namespaces.setOverride({
      id: newId("rlor", now),
      workspaceId: caller.workspaceId,
      namespaceId: namespace.id,
      identifier: input.identifier,
      limit: input.limit,
      durationMs: input.durationMs,
      createdAt: now,
    });
    this.directory.forget(caller.workspaceId, namespace.id, namespace.name);
    this.audit.record(caller, overrideChanges("ratelimit.set_override", namespace, before, stored));
    return { overrideId: stored.id };
  }

  /** ratelimit.getOverride: the override stored under exactly this identifier or pattern. */
  async getOverride(caller: Caller, input: NamespaceTarget & { identifier: string }): Promise<OverrideView> {
    const namespace = await this.liveNamespace(caller, input.namespace, "read_override");
    const override = await this.namespaces.getOverride(caller.workspaceId, namespace.id, input.identifier);
    if (!override) throw overrideNotFound(input.identifier, input.namespace);
    return overrideView(override);
  }

  /** ratelimit.listOverrides: a keyset page ordered by override id; `cursor` is the first id of the page. */
  async listOverrides(caller: Caller, input: ListOverridesInput): Promise<OverridesPage> {
    const namespace = await this.liveNamespace(caller, input.namespace, "read_override");
    const query: { cursor?: string; limit: number } = { limit: input.limit + 1 };
    if (input.cursor !== undefined) query.cursor = input.cursor;
    const page = await this.namespaces.listOverrides(caller.workspaceId, namespace.id, query);
    const next = page[input.limit];
    const answer: OverridesPage = { overrides: page.slice(0, input.limit).map(overrideView), hasMore: next !== undefined };
    if (next !== undefined) answer.cursor = next.id;
    return answer;
  }

  /** ratelimit.deleteOverride: removes the override stored under exactly this identifier or pattern. */
  async deleteOverride(caller: Caller, input: NamespaceTarget & { identifier: string }): Promise<void> {
    const namespace = await this.liveNamespace(caller, input.namespace, "delete_override");
    const before = await this.namespaces.getOverride(caller.workspaceId, namespace.id, input.identifier);
    const deleted = await this.namespaces.deleteOverride(caller.workspaceId, namespace.id, input.identifier);
    if (!deleted || !before) throw overrideNotFound(input.identifier, input.namespace);
    this.audit.record(caller, overrideChanges("ratelimit.delete_override", namespace, before, null));
    this.directory.forget(caller.workspaceId, namespace.id, namespace.name);
  }

  /**
   * keygate.listRatelimitNamespaces: the live namespaces the caller may read, by id. `ratelimit.*.read_namespace`
   * reads them all, `ratelimit.<id>.read_namespace` the one it names; a root key with neither is refused.
   */
  async listLiveNamespaces(caller: Caller): Promise<NamespaceView[]> {
    if (!caller.can(requireRatelimit("read_namespace")) && caller.namedResourceIds("ratelimit").length === 0)
      caller.authorize(requireRatelimit("read_namespace"));
    return (await this.namespaces.listNamespaces(caller.workspaceId))
      .filter((namespace) => namespace.deletedAt === undefined && caller.can(requireRatelimit("read_namespace", namespace.id)))
      .map((namespace) => ({ id: namespace.id, name: namespace.name, createdAt: namespace.createdAt }));
  }

  /** Every namespace of a workspace, deleted ones included (the operator CLI). */
  listNamespaces(workspaceId: string): Promise<RatelimitNamespaceRecord[]> {
    return this.namespaces.listNamespaces(workspaceId);
  }

  /**
   * Soft-deletes a namespace (the operator CLI; no /v2 procedure deletes namespaces). limit and multiLimit then
   * answer 410 for it, and the override procedures 404; its name stays taken.
   */
  async deleteNamespace(workspaceId: string, nameOrId: string): Promise<RatelimitNamespaceRecord> {
    const namespace = await this.lookUp(workspaceId, nameOrId);
    const deleted = namespace && (await this.namespaces.markNamespaceDeleted(workspaceId, namespace.id, this.clock.now()));
    if (!deleted) throw namespaceNotFound(nameOrId);
    this.directory.forget(workspaceId, deleted.id, deleted.name);
    return deleted;
  }

  /**
   * Unknown namespaces are created only when the root key may create them and then limit in them (so a 403 leaves
   * nothing behind); then the limit permission is needed for every namespace, and a deleted one is 410.
   */
  private async limitAsCaller(
    caller: Caller,
    requests: readonly LimitRequest[],
    call: Omit<DecisionCall, "workspaceId">,
  ): Promise<LimitOutcome> {
    const workspaceId = caller.workspaceId;
    const resolved = await this.resolver.findAll(workspaceId, requests);
    const missing = missingNames(resolved);
    if (missing.length > 0) {
      try {
        caller.authorize(allOf(requireRatelimit("create_namespace"), requireRatelimit("limit")));
      } catch (error) {
        if (!(error instanceof KeygateError)) throw error;
        const names = missing.map((name) => `'${name}'`).join(", ");
        const noun = missing.length === 1 ? "namespace" : "namespaces";
        throw new KeygateError(
          error.code,
          `${error.detail.replace(/\.$/, "")} (to create the ${noun} ${names}, which do${missing.length === 1 ? "es" : ""} not exist yet).`,
        );
      }
      await this.resolver.createAll(workspaceId, missing, resolved);
    }
    const namespaceIds = new Set<string>();
    for (const namespace of resolved.values()) namespaceIds.add((namespace as ResolvedNamespace).namespace.id);
    caller.authorize(allOf(...[...namespaceIds].map((id) => requireRatelimit("limit", id))));
    // Written out: an object literal that adds a property after a spread costs microseconds on the request path.
    const decision = { requestId: call.requestId, source: call.source, workspaceId };
    return this.decide(decision, applyOverrides(requests, resolved as Map<string, ResolvedNamespace>));
  }

  /** Decides the checks on the counters and records the decision; a degraded answer (`ratelimit.fail`) is one too. */
  private async decide(call: DecisionCall, limits: readonly NamespaceLimitCheck[]): Promise<LimitOutcome> {
    const { workspaceId, requestId, source } = call;
    const startedAt = performance.now();
    const outcome = await this.limiter.checkAndConsume(
      workspaceId,
      limits.map(({ check }) => check),
      { source },
    );
    const latencyMs = performance.now() - startedAt;
    const decisions = limits.map((limit, index) => decided(limit, outcome.results[index] as WindowResult));
    recordRatelimitDecision(this.events, { requestId, workspaceId, time: outcome.now, latencyMs }, decisions);
    if (!outcome.passed) {
      // Durable before the answer, as every notice: only a denial that tells a new window waits.
      const exceeded = this.exceeded.note(workspaceId, decisions);
      if (exceeded !== undefined) await exceeded;
    }
    const answer: LimitOutcome = { passed: outcome.passed, decisions, decidedAt: outcome.now };
    if (outcome.degraded !== undefined) answer.degraded = outcome.degraded;
    return answer;
  }

  /**
   * A live namespace of the caller's workspace, read from the store (not the cache: management answers what is
   * stored now), and the caller's permission for `action` on it. Absent and deleted namespaces are 404.
   */
  private async liveNamespace(caller: Caller, nameOrId: string, action: RatelimitAction): Promise<RatelimitNamespaceRecord> {
    const namespace = await this.lookUp(caller.workspaceId, nameOrId);
    if (!namespace || namespace.deletedAt !== undefined) throw namespaceNotFound(nameOrId);
    caller.authorize(requireRatelimit(action, namespace.id));
    return namespace;
  }

  private async lookUp(workspaceId: string, nameOrId: string): Promise<RatelimitNamespaceRecord | null> {
    if (nameOrId.startsWith("rlns_")) {
      const byId = await this.namespaces.getNamespace(workspaceId, nameOrId);
      if (byId) return byId;
    }
    return this.namespaces.findNamespaceByName(workspaceId, nameOrId);
  }
}

/** Whose decision it is: recorded under the request, reported under the source. */
interface DecisionCall {
  workspaceId: string;
  requestId: string;
  source: RatelimitSource;
}
