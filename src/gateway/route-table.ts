import { PermissionQuerySyntaxError, parsePermissionQuery } from "../domain/permissions/query.js";
import { costWithinLimit } from "../domain/routes/policy-compiler.js";
import type { Problem } from "../domain/routes/problems.js";
import {
  type CompiledRoute,
  compileDecisionOnlyRoute,
  compileRoute,
  type DecisionOnlyRoute,
  type DecisionRoute,
  type RouteCompileRules,
  type RouteDefinition,
} from "../domain/routes/route-compiler.js";
import { isManagementPath, samePath } from "../http/request-target.js";
import { configRouteDefinition } from "./config-routes.js";
import type { RouteConfig } from "./route-config.js";
import { readUpstreamTlsFile } from "./upstream-tls.js";

export type { CompiledRoute, DecisionOnlyRoute, DecisionRoute } from "../domain/routes/route-compiler.js";

/** How the gateway compiles routes: prefixes compared as requests are, /v2 reserved, upstream TLS files read. */
export const ROUTE_RULES: RouteCompileRules = { reserved: isManagementPath, samePath, readTlsFile: readUpstreamTlsFile };

/** A stored route left out of the table, and why (it clashes with a route of the configuration file). */
export interface SkippedRoute {
  route: RouteDefinition;
  problems: readonly Problem[];
}

/** Routes compiled for matching, longest prefix first: those of the configuration file, then the stored ones. */
export class RouteTable {
  /** The routes keygate forwards (the inline gateway's). */
  readonly routes: readonly CompiledRoute[];
  /** The configuration's routes without an upstream, which only the forward-auth door decides. */
  readonly decisionOnly: readonly DecisionOnlyRoute[];
  /** Both, longest prefix first: what the forward-auth door matches. */
  private readonly decided: readonly DecisionRoute[];
  /** Stored routes that could not join the table. */
  readonly skipped: readonly SkippedRoute[];

  private constructor(routes: CompiledRoute[], decisionOnly: DecisionOnlyRoute[], skipped: SkippedRoute[]) {
    this.routes = routes;
    this.decisionOnly = decisionOnly;
    this.decided = decisionOnly.length === 0 ? routes : [...routes, ...decisionOnly].sort(longestPrefixFirst);
    this.skipped = skipped;
  }

  /**
   * Compiles the configuration file's routes and the stored ones. Throws RouteTableError listing every problem of
   * the configuration's routes (each naming `routes[i]...`). A stored route was valid when it was written, but may
   * clash with the configuration (a name or a prefix and method taken since): it is left out, in `skipped`.
   */
  static compile(configs: readonly RouteConfig[], stored: readonly RouteDefinition[] = []): RouteTable {
    const problems: Problem[] = [];
    const compiled: CompiledRoute[] = [];
    const decisionOnly: DecisionOnlyRoute[] = [];
    // Each route with its index in the file, for the clash check.
    const fileRoutes: DecisionRoute[] = [];
    const fileIndex: number[] = [];
    configs.forEach((config, index) => {
      const at = `routes[${index}]`;
      const before = problems.length;
      problems.push(...configRouteProblems(config, at));
      if (problems.length > before) return;
      const definition = configRouteDefinition(config);
      const route =
        "upstream" in definition
          ? compileRoute(definition, at, ROUTE_RULES, problems)
          : compileDecisionOnlyRoute(definition, at, ROUTE_RULES, problems);
      if (route === undefined) return;
      if (route.decisionOnly) decisionOnly.push(route);
      else compiled.push(route);
      fileRoutes.push(route);
      fileIndex.push(index);
    });
    problems.push(...clashes(fileRoutes, (position) => `routes[${fileIndex[position]}]`));
    if (problems.length > 0) throw new RouteTableError(problems.map(({ at, message }) => `${at}: ${message}`));

    const skipped: SkippedRoute[] = [];
    for (const definition of stored) {
      const routeProblems: Problem[] = [];
      const route = compileRoute(definition, "", ROUTE_RULES, routeProblems);
      if (route) routeProblems.push(...clashWith(route, compiled), ...clashWith(route, decisionOnly));
      if (route && routeProblems.length === 0) compiled.push(route);
      else skipped.push({ route: definition, problems: routeProblems });
    }
    compiled.sort(longestPrefixFirst);
    decisionOnly.sort(longestPrefixFirst);
    return new RouteTable(compiled, decisionOnly, skipped);
  }

  /**
   * Methods some route takes for this path (for a 405's Allow); empty when no route's prefix matches it. `door`:
   * the forward-auth door's routes (decision-only ones too), else the inline gateway's.
   */
  methodsFor(path: string, door = false): string[] {
    const methods = new Set<string>();
    const same = samePath(path);
    for (const route of door ? this.decided : this.routes) {
      if (!prefixMatches(route.prefix, same)) continue;
      for (const method of route.methods ?? []) methods.add(method);
    }
    return [...methods];
  }

  /**
   * The route for a request: the longest prefix that matches the path on a segment boundary, and the method. The
   * path is compared with its escaped unreserved characters decoded (see samePath).
   */
  match(method: string, path: string): CompiledRoute | undefined {
    return matchIn(this.routes, method, path);
  }

  /** The route the forward-auth door decides a request with: as match, among every route, decision-only ones too. */
  matchDecision(method: string, path: string): DecisionRoute | undefined {
    return matchIn(this.decided, method, path);
  }
}

function matchIn<R extends DecisionRoute>(routes: readonly R[], method: string, path: string): R | undefined {
  const same = samePath(path);
  for (const route of routes) {
    if (!prefixMatches(route.prefix, same)) continue;
    if (route.methods && !route.methods.has(method)) continue;
    return route;
  }
  return undefined;
}

function longestPrefixFirst(a: DecisionRoute, b: DecisionRoute): number {
  return b.prefix.length - a.prefix.length;
}

export class RouteTableError extends Error {
  readonly problems: readonly string[];
  constructor(problems: string[]) {
    super(problems.join("; "));
    this.name = "RouteTableError";
    this.problems = problems;
  }
}

function prefixMatches(prefix: string, path: string): boolean {
  if (prefix === "") return true;
  return path.startsWith(prefix) && (path.length === prefix.length || path[prefix.length] === "/");
}

/** Problems of the configuration file's own fields, which its route's policies are made from. */
function configRouteProblems(config: RouteConfig, at: string): Problem[] {
  const problems: Problem[] = [];
  const key = config.key;
  if (key !== undefined) {
    if ((key.header === undefined) === (key.query === undefined))
      problems.push({ at: `${at}.key`, message: "give exactly one of 'header' or 'query'" });
    else if (key.query !== undefined && key.scheme !== undefined)
      problems.push({ at: `${at}.key.scheme`, message: "only applies to a header" });
  }
  if (config.permissions !== undefined) {
    const error = permissionQueryError(config.permissions);
    if (error) problems.push({ at: `${at}.permissions`, message: error });
  }
  problems.push(...publicRouteProblems(config, at));
  if (config.upstream === undefined) {
    // A decision-only route: keygate forwards nothing of it, so nothing about forwarding would ever apply.
    for (const field of ["stripPrefix", "rewrite", "host", "bodyLimit", "timeoutMs"] as const) {
      if (config[field] !== undefined)
        problems.push({ at: `${at}.${field}`, message: "is about forwarding; a route without upstream is decision-only (forward auth)" });
    }
  }
  for (const [index, limit] of (config.namespaceLimits ?? []).entries())
    costWithinLimit(limit, `${at}.namespaceLimits[${index}]`, problems);
  const limitNames = new Set<string>();
  (config.ratelimits ?? []).forEach((limit, index) => {
    if (limitNames.has(limit.name)) problems.push({ at: `${at}.ratelimits[${index}].name`, message: `'${limit.name}' is listed twice` });
    limitNames.add(limit.name);
  });
  return problems;
}

/** A route without `apiId` is public: it reads no key, so nothing that needs one, and it names its workspace. */
function publicRouteProblems(config: RouteConfig, at: string): Problem[] {
  if (config.apiId !== undefined) {
    return config.workspaceId === undefined
      ? []
      : [{ at: `${at}.workspaceId`, message: "is the API's on a route with apiId; leave it out" }];
  }
  const problems: Problem[] = [];
  for (const field of ["key", "permissions", "ratelimits", "credits"] as const) {
    if (config[field] !== undefined)
      problems.push({ at: `${at}.${field}`, message: "needs apiId: a route without apiId is public and reads no key" });
  }
  if (config.workspaceId === undefined) {
    problems.push({
      at: `${at}.workspaceId`,
      message: "is required on a public route (no apiId): its limits and analytics belong to a workspace",
    });
  }
  (config.namespaceLimits ?? []).forEach((limit, index) => {
    if (limit.identifier === "key" || limit.identifier === "identity") {
      problems.push({
        at: `${at}.namespaceLimits[${index}].identifier`,
        message: `'${limit.identifier}' needs a key; a public route counts by ip or header:<name>`,
      });
    }
  });
  return problems;
}

function permissionQueryError(text: string): string | undefined {
  try {
    parsePermissionQuery(text);
    return undefined;
  } catch (error) {
    if (error instanceof PermissionQuerySyntaxError) return error.message;
    throw error;
  }
}

/** Routes of the same name, or of the same prefix sharing a method (which one answers would be arbitrary). */
function clashes(routes: readonly DecisionRoute[], at: (index: number) => string): Problem[] {
  const problems: Problem[] = [];
  const names = new Map<string, number>();
  routes.forEach((route, index) => {
    const earlier = names.get(route.name);
    if (earlier !== undefined) problems.push({ at: `${at(index)}.name`, message: `'${route.name}' is also the name of ${at(earlier)}` });
    else names.set(route.name, index);
  });
  for (let i = 0; i < routes.length; i++) {
    for (let j = i + 1; j < routes.length; j++) {
      const a = routes[i] as DecisionRoute;
      const b = routes[j] as DecisionRoute;
      if (sharesRequests(a, b)) {
        problems.push({
          at: `${at(j)}.match`,
          message: `same prefix '${b.definition.match.prefix}' and methods as ${at(i)}; give them different methods`,
        });
      }
    }
  }
  return problems;
}

/** Why `route` cannot join `routes`: a name taken, or a prefix and method taken. */
export function clashWith(route: DecisionRoute, routes: readonly DecisionRoute[]): Problem[] {
  const problems: Problem[] = [];
  for (const other of routes) {
    if (other.id === route.id) continue;
    if (other.name === route.name) problems.push({ at: "name", message: `'${route.name}' is the name of another route` });
    if (sharesRequests(route, other)) {
      problems.push({
        at: "match",
        message: `route '${other.name}' already takes the prefix '${other.definition.match.prefix}' for these methods; give this one other methods or another prefix`,
      });
    }
  }
  return problems;
}

function sharesRequests(a: DecisionRoute, b: DecisionRoute): boolean {
  return a.prefix === b.prefix && (!a.methods || !b.methods || [...a.methods].some((method) => b.methods?.has(method)));
}
