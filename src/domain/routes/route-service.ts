import { isDeepStrictEqual } from "node:util";
import { invalidInput, KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { newId } from "../../lib/ids.js";
import type { RouteStore, StoredRouteTable } from "../../storage/route-interfaces.js";
import type { PolicyRecord, RouteRecord } from "../../storage/route-records.js";
import { type AuditAction, type AuditTrail, UNAUDITED } from "../audit/audit-trail.js";
import type { Caller } from "../caller.js";
import { requireGateway } from "../root-keys/permissions.js";
import { compilePolicies, POLICY_KINDS } from "./policy-compiler.js";
import type { Problem, Problems } from "./problems.js";
import { type CompiledRoute, compileRoute, type DecisionRoute, type RouteCompileRules } from "./route-compiler.js";
import { configView, type RouteView, storedView, type UpstreamTargetHealth, withHealth } from "./route-views.js";
import {
  clashIn,
  definitionOf,
  keepingIds,
  type OptionalRouteField,
  routeAudit,
  setOptionalFields,
  swapped,
  withId,
} from "./route-writes.js";

/** A policy as a client writes it: its id is keygate's to give. */
export type PolicyInput = Omit<PolicyRecord, "id">;
/** A route as a client writes it. */
export type RouteInput = Pick<RouteRecord, "name" | "match" | "upstream" | OptionalRouteField> & { policies?: PolicyInput[] };

/** A partial update of a route: what is given replaces what is stored; null removes an optional field. */
export type RouteChange = Partial<Pick<RouteRecord, "name" | "match" | "upstream">> & { policies?: PolicyInput[] } & {
  [F in OptionalRouteField]?: RouteRecord[F] | null;
};

/** A partial update of one policy: what is given replaces what is stored (a rule replaces the rule); null `match` removes it. */
export type PolicyChange = Partial<Omit<PolicyInput, "match">> & { match?: PolicyRecord["match"] | null };

/** Tells every instance the stored routes changed (the invalidation bus). */
export interface RouteChangeNotifier {
  routesChanged(version: number): Promise<void>;
}

export interface RouteServiceOptions {
  store: RouteStore;
  /** The routes of the configuration file in force, compiled: they are listed, read-only, and no route may clash with them. */
  configRoutes: () => readonly CompiledRoute[];
  /** Its decision-only routes (no upstream, the forward-auth door's): not listed, but no route may clash with them. */
  decisionOnlyRoutes?: () => readonly DecisionRoute[];
  /** Whether an API id or key space id names a live API of the workspace. */
  isApiOf: (workspaceId: string, apiOrKeySpaceId: string) => Promise<boolean>;
  /** What is wrong with an OpenAPI document's text (empty when it can validate requests). */
  openApiProblems: (text: string) => Promise<string[]>;
  notifier: RouteChangeNotifier;
  /**
   * Why a route may not have `url` as an upstream: one at (or resolving to) a loopback, private or reserved
   * address, which only the operator's configuration may open to routes of the API; undefined when it may.
   */
  upstreamRefusal: (url: URL) => Promise<string | undefined>;
  rules: RouteCompileRules;
  clock: Clock;
  /** The state of a route's upstream targets as this process sees them (a pool's only); shown with the route. */
  upstreamHealth?: (routeId: string) => UpstreamTargetHealth[] | undefined;
  audit?: AuditTrail;
}

/** Largest OpenAPI document a route may have, in characters. */
export const MAX_OPENAPI_DOCUMENT = 1_000_000;

/**
 * The gateway's routes as data (keygate.*Route procedures, and Unkey's gateway.* on top): each write is validated in
 * full (its policies compiled, its APIs checked, no clash with another route) before anything is stored, then
 * stored as one new version of the route table that every instance takes up. Routes of the configuration file are
 * listed with `source: "config"` and refused by every write.
 */
export class RouteService {
  private readonly options: RouteServiceOptions;

  constructor(options: RouteServiceOptions) {
    this.options = options;
  }

  async createRoute(caller: Caller, input: RouteInput): Promise<RouteView> {
    caller.authorize(requireGateway("create_route"));
    const now = this.options.clock.now();
    const route: RouteRecord = {
      id: newId("rt", now),
      workspaceId: caller.workspaceId,
      name: input.name,
      match: input.match,
      upstream: input.upstream,
      policies: (input.policies ?? []).map((policy) => withId(policy, now)),
      createdAt: now,
      updatedAt: now,
    };
    setOptionalFields(route, input);
    await this.validate(route, true);
    return this.write(
      { caller, action: "route.create", before: null, after: route },
      () => storedView(route),
      (table) => [...table.routes, route],
    );
  }

  async getRoute(caller: Caller, input: { route: string }): Promise<RouteView> {
    const found = await this.find(caller, input.route, "read_route");
    return withHealth(found.stored ? storedView(found.stored) : configView(found.config), this.options.upstreamHealth);
  }

  /** The routes the caller may read: its workspace's stored ones, and those of the configuration in front of its APIs. */
  async listRoutes(caller: Caller): Promise<RouteView[]> {
    const readable = (id: string) => caller.can(requireGateway("read_route", id));
    if (!caller.can(requireGateway("read_route")) && caller.namedResourceIds("gateway").length === 0) {
      caller.authorize(requireGateway("read_route"));
    }
    const views: RouteView[] = [];
    for (const route of this.options.configRoutes()) {
      if (readable(route.id) && (await this.configRouteOf(caller.workspaceId, route))) views.push(configView(route));
    }
    for (const route of (await this.options.store.table()).routes) {
      if (route.workspaceId === caller.workspaceId && readable(route.id)) views.push(storedView(route));
    }
    return views.map((view) => withHealth(view, this.options.upstreamHealth));
  }

  async updateRoute(caller: Caller, input: { route: string } & RouteChange): Promise<RouteView> {
    const current = await this.stored(caller, input.route, "update_route");
    const now = this.options.clock.now();
    const next: RouteRecord = { ...current, updatedAt: now };
    if (input.name !== undefined) next.name = input.name;
    if (input.match !== undefined) next.match = input.match;
    if (input.upstream !== undefined) next.upstream = input.upstream;
    if (input.policies !== undefined) next.policies = keepingIds(current.policies, input.policies, now);
    setOptionalFields(next, input);
    return this.replace(caller, "route.update", current, next);
  }

  async deleteRoute(caller: Caller, input: { route: string }): Promise<void> {
    const current = await this.stored(caller, input.route, "delete_route");
    await this.write(
      { caller, action: "route.delete", before: current, after: null },
      () => undefined,
      (table) => table.routes.filter((route) => route.id !== current.id),
    );
  }

  /**
   * Replaces a route's policies, all at once: a policy whose name stays keeps its id (and its rate limit counts,
   * which are kept by route and policy name).
   */
  async setRoutePolicies(caller: Caller, input: { route: string; policies: PolicyInput[] }): Promise<RouteView> {
    const current = await this.stored(caller, input.route, "update_route");
    const now = this.options.clock.now();
    return this.replace(caller, "route.set_policies", current, {
      ...current,
      policies: keepingIds(current.policies, input.policies, now),
      updatedAt: now,
    });
  }

  /** Changes one policy, keeping its id and its place; a rule given replaces the policy's rule, whatever its kind. */
  async updateRoutePolicy(caller: Caller, input: { route: string; policyId: string } & PolicyChange): Promise<RouteView> {
    const current = await this.stored(caller, input.route, "update_route");
    const index = current.policies.findIndex((policy) => policy.id === input.policyId);
    const policy = current.policies[index];
    if (!policy) {
      throw new KeygateError("err:keygate:data:policy_not_found", `The route '${current.name}' has no policy '${input.policyId}'.`);
    }
    const { route: _route, policyId: _policyId, match, ...change } = input;
    const rules = RULE_FIELDS.filter((field) => change[field] !== undefined);
    if (rules.length > 1) throw invalidInput([{ location: "body", message: `must set at most one of ${RULE_FIELDS.join(", ")}` }]);
    const next: PolicyRecord = { ...policy };
    if (rules.length === 1) for (const field of RULE_FIELDS) delete next[field];
    Object.assign(next, change);
    if (match === null) delete next.match;
    else if (match !== undefined) next.match = match;
    const policies = current.policies.map((each, at) => (at === index ? next : each));
    // The policy's own problems are named as the fields of this body (`match[0]`, not `policies[3].match[0]`).
    const problems: Problems = [];
    compilePolicies([next], current.name, "policy", problems);
    if (problems.length > 0) throw invalid(problems.map((problem) => ({ ...problem, at: problem.at.replace(/^policy\[0\]\.?/, "") })));
    return this.replace(caller, "route.update_policy", current, { ...current, policies, updatedAt: this.options.clock.now() });
  }

  /** Stores the OpenAPI document a route's openapi policies validate requests against (null removes it). */
  async setRouteOpenApi(caller: Caller, input: { route: string; document: string | null }): Promise<RouteView> {
    const current = await this.stored(caller, input.route, "update_route");
    const { document } = input;
    if (document !== null) {
      if (document.length > MAX_OPENAPI_DOCUMENT) {
        throw invalid([{ at: "document", message: `must be at most ${MAX_OPENAPI_DOCUMENT} characters` }]);
      }
      const problems = await this.options.openApiProblems(document);
      if (problems.length > 0) throw invalid(problems.map((message) => ({ at: "document", message })));
    }
    const now = this.options.clock.now();
    const next: RouteRecord = { ...current, updatedAt: now };
    if (document === null) delete next.openApi;
    // Later than the upload it replaces, even within one millisecond: instances keep a document while it is the same.
    else next.openApi = { uploadedAt: Math.max(now, (current.openApi?.uploadedAt ?? 0) + 1) };
    return this.write(
      { caller, action: "route.set_openapi", before: current, after: next },
      () => storedView(next),
      (table) => swapped(table, current, next),
      { routeId: current.id, text: document },
    );
  }

  /** The document a route's openapi policies use; null when it has none. */
  async getRouteOpenApi(caller: Caller, input: { route: string }): Promise<string | null> {
    const current = await this.stored(caller, input.route, "read_route");
    return this.options.store.openApi(current.id);
  }

  private async replace(caller: Caller, action: AuditAction, current: RouteRecord, next: RouteRecord): Promise<RouteView> {
    await this.validate(next, !isDeepStrictEqual(current.upstream, next.upstream));
    return this.write(
      { caller, action, before: current, after: next },
      () => storedView(next),
      (table) => swapped(table, current, next),
    );
  }

  /**
   * Writes the table `next` makes of the current one, unless the route changed meanwhile or now clashes (409), records
   * `audit`, and tells every instance. Returns `result()`.
   */
  private async write<R>(
    audit: { caller: Caller; action: AuditAction; before: RouteRecord | null; after: RouteRecord | null },
    result: () => R,
    next: (table: StoredRouteTable) => RouteRecord[],
    openApi?: { routeId: string; text: string | null },
  ): Promise<R> {
    const version = await this.options.store.update((table) => {
      const routes = next(table);
      const config = this.options.configRoutes();
      const decisionOnly = this.options.decisionOnlyRoutes?.() ?? [];
      const clash = clashIn(routes, decisionOnly.length === 0 ? config : [...config, ...decisionOnly], this.options.rules);
      if (clash) throw clash;
      return openApi ? { result: table.version + 1, routes, openApi } : { result: table.version + 1, routes };
    });
    (this.options.audit ?? UNAUDITED).record(audit.caller, routeAudit(audit.action, audit.before, audit.after));
    await this.options.notifier.routesChanged(version);
    return result();
  }

  /**
   * Every problem of a route, each named by its field in the request body (`body.policies[2].match[0]`); where its
   * upstream is too, when it is new (`upstreamChanged`): a route kept as it was is checked again at every connection.
   */
  private async validate(route: RouteRecord, upstreamChanged: boolean): Promise<void> {
    const problems: Problems = [];
    compileRoute(definitionOf(route), "", this.options.rules, problems);
    if (upstreamChanged) problems.push(...(await this.upstreamProblems(route.upstream)));
    for (const [index, policy] of route.policies.entries()) {
      for (const [position, keyspace] of (policy.keyauth?.keyspaces ?? []).entries()) {
        if (!(await this.options.isApiOf(route.workspaceId, keyspace))) {
          problems.push({
            at: `policies[${index}].keyauth.keyspaces[${position}]`,
            message: `'${keyspace}' is not an API of this workspace`,
          });
        }
      }
    }
    if (problems.length > 0) throw invalid(problems);
  }

  /** Each target of `upstream` the route may not reach, named by its field (one that does not parse is compileRoute's). */
  private async upstreamProblems(upstream: RouteRecord["upstream"]): Promise<Problem[]> {
    const targets =
      typeof upstream === "string"
        ? [{ url: upstream, at: "upstream" }]
        : upstream.targets.map((target, index) => ({ url: target.url, at: `upstream.targets[${index}].url` }));
    const problems: Problem[] = [];
    for (const { url, at } of targets) {
      if (!URL.canParse(url)) continue;
      const message = await this.options.upstreamRefusal(new URL(url));
      if (message !== undefined) problems.push({ at, message });
    }
    return problems;
  }

  /** A stored route of the caller's workspace it may `action`; a route of the configuration file is 409. */
  private async stored(caller: Caller, route: string, action: "read_route" | "update_route" | "delete_route"): Promise<RouteRecord> {
    const found = await this.find(caller, route, action);
    if (found.stored) return found.stored;
    throw new KeygateError(
      "err:keygate:data:route_owned_by_config",
      `The route '${found.config.name}' comes from the configuration file; change it in the file (a reload takes it up), not through the API.`,
    );
  }

  /** The route named `route` (id or name) as the caller sees it; 404 unless it is its workspace's and it may `action`. */
  private async find(
    caller: Caller,
    route: string,
    action: "read_route" | "update_route" | "delete_route",
  ): Promise<{ stored: RouteRecord; config?: undefined } | { stored?: undefined; config: CompiledRoute }> {
    const named = (candidate: { id: string; name: string }) => candidate.id === route || candidate.name === route;
    const stored = (await this.options.store.table()).routes.find(
      (candidate) => named(candidate) && candidate.workspaceId === caller.workspaceId,
    );
    if (stored) {
      caller.authorize(requireGateway(action, stored.id));
      return { stored };
    }
    const config = this.options.configRoutes().find(named);
    if (config && (await this.configRouteOf(caller.workspaceId, config))) {
      caller.authorize(requireGateway(action, config.id));
      return { config };
    }
    throw new KeygateError("err:keygate:data:route_not_found", `The route '${route}' does not exist.`);
  }

  /** Whether a route of the configuration file serves this workspace: its first keyauth policy's API's, or a public route's own. */
  private async configRouteOf(workspaceId: string, route: CompiledRoute): Promise<boolean> {
    if (route.workspaceApiId === undefined) return route.definition.workspaceId === workspaceId;
    return this.options.isApiOf(workspaceId, route.workspaceApiId);
  }
}

const RULE_FIELDS = POLICY_KINDS;

/** A 400 naming each problem's field in the request body. */
function invalid(problems: readonly Problem[]): KeygateError {
  return invalidInput(problems.map(({ at, message }) => ({ location: at === "" ? "body" : `body.${at}`, message })));
}
