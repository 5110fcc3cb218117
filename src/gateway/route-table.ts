import { type PermissionQuery, PermissionQuerySyntaxError, parsePermissionQuery } from "../domain/permissions/query.js";
import { isManagementPath, MANAGEMENT_PREFIX, samePath } from "../http/request-target.js";
import type { RouteConfig } from "./route-config.js";

export type KeySource = { kind: "header"; header: string; scheme?: string } | { kind: "query"; parameter: string };

export type IdentifierSource = { kind: "key" } | { kind: "identity" } | { kind: "ip" } | { kind: "header"; header: string };

/** A route ready to serve: its configuration, parsed once. Immutable; a reload builds a new table. */
export interface CompiledRoute {
  readonly config: RouteConfig;
  readonly name: string;
  /** Without a trailing slash ("" for "/"), escaped unreserved characters decoded (see samePath). */
  readonly prefix: string;
  readonly methods: ReadonlySet<string> | undefined;
  readonly upstream: URL;
  /** The upstream's path without trailing slashes ("" for none): request paths are appended to it. */
  readonly upstreamBase: string;
  readonly keySource: KeySource;
  readonly permissionQuery: PermissionQuery | undefined;
  readonly namespaceLimits: readonly { namespace: string; identifier: IdentifierSource; limit: number; durationMs: number; cost: number }[];
}

/** Routes compiled for matching, longest prefix first. */
export class RouteTable {
  readonly routes: readonly CompiledRoute[];

  private constructor(routes: CompiledRoute[]) {
    this.routes = routes;
  }

  static empty(): RouteTable {
    return new RouteTable([]);
  }

  /**
   * Compiles route configurations. Throws RouteTableError listing every problem (each naming `routes[i]...`)
   * when one is invalid in a way the schema cannot see.
   */
  static compile(configs: readonly RouteConfig[]): RouteTable {
    const problems: string[] = [];
    const compiled: CompiledRoute[] = [];
    const names = new Map<string, number>();
    configs.forEach((config, index) => {
      const at = `routes[${index}]`;
      const earlier = names.get(config.name);
      if (earlier !== undefined) problems.push(`${at}.name: '${config.name}' is also the name of routes[${earlier}]`);
      names.set(config.name, index);
      const route = compileRoute(config, at, problems);
      if (route) compiled.push(route);
    });
    findOverlaps(compiled, configs, problems);
    if (problems.length > 0) throw new RouteTableError(problems);
    compiled.sort((a, b) => b.prefix.length - a.prefix.length);
    return new RouteTable(compiled);
  }

  /** Methods some route takes for this path (for a 405's Allow); empty when no route's prefix matches it. */
  methodsFor(path: string): string[] {
    const methods = new Set<string>();
    const same = samePath(path);
    for (const route of this.routes) {
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
    const same = samePath(path);
    for (const route of this.routes) {
      if (!prefixMatches(route.prefix, same)) continue;
      if (route.methods && !route.methods.has(method)) continue;
      return route;
    }
    return undefined;
  }
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

function compileRoute(config: RouteConfig, at: string, problems: string[]): CompiledRoute | undefined {
  const prefix = samePath(config.match.prefix.replace(/\/+$/, ""));
  if (isManagementPath(prefix)) {
    problems.push(`${at}.match.prefix: '${config.match.prefix}' is reserved for the management API (${MANAGEMENT_PREFIX})`);
  }
  if (/[?#]/.test(config.match.prefix)) problems.push(`${at}.match.prefix: must be a path, without '?' or '#'`);

  let upstream: URL | undefined;
  try {
    upstream = new URL(config.upstream);
    if (upstream.search || upstream.hash) problems.push(`${at}.upstream: must not have a query string or fragment`);
  } catch {
    problems.push(`${at}.upstream: '${config.upstream}' is not a valid URL`);
  }

  const key = config.key ?? { header: "authorization", scheme: "Bearer" };
  let keySource: KeySource | undefined;
  if ((key.header === undefined) === (key.query === undefined)) problems.push(`${at}.key: give exactly one of 'header' or 'query'`);
  else if (key.query !== undefined) {
    if (key.scheme !== undefined) problems.push(`${at}.key.scheme: only applies to a header`);
    keySource = { kind: "query", parameter: key.query };
  } else
    keySource = {
      kind: "header",
      header: (key.header as string).toLowerCase(),
      ...(key.scheme !== undefined ? { scheme: key.scheme } : {}),
    };

  let permissionQuery: PermissionQuery | undefined;
  if (config.permissions !== undefined) {
    try {
      permissionQuery = parsePermissionQuery(config.permissions);
    } catch (error) {
      if (!(error instanceof PermissionQuerySyntaxError)) throw error;
      problems.push(`${at}.permissions: ${error.message}`);
    }
  }

  const forward = config.forward ?? {};
  const forwarded = Object.values(forward).map((header) => header.toLowerCase());
  if (new Set(forwarded).size !== forwarded.length) problems.push(`${at}.forward: two values share a header name`);
  if (keySource?.kind === "header" && forwarded.includes(keySource.header))
    problems.push(`${at}.forward: '${keySource.header}' is the header the key is read from`);

  const limitNames = new Set<string>();
  (config.ratelimits ?? []).forEach((limit, index) => {
    if (limitNames.has(limit.name)) problems.push(`${at}.ratelimits[${index}].name: '${limit.name}' is listed twice`);
    limitNames.add(limit.name);
  });

  if (!upstream || !keySource) return undefined;
  return {
    config,
    name: config.name,
    prefix,
    methods: config.match.methods ? new Set(config.match.methods) : undefined,
    upstream,
    upstreamBase: upstream.pathname.replace(/\/+$/, ""),
    keySource,
    permissionQuery,
    namespaceLimits: (config.namespaceLimits ?? []).map((limit) => ({
      namespace: limit.namespace,
      identifier: parseIdentifier(limit.identifier),
      limit: limit.limit,
      durationMs: limit.duration,
      cost: limit.cost,
    })),
  };
}

function parseIdentifier(identifier: string): IdentifierSource {
  if (identifier.startsWith("header:")) return { kind: "header", header: identifier.slice("header:".length).toLowerCase() };
  return { kind: identifier as "key" | "identity" | "ip" };
}

/** Two routes with the same prefix must not both take a method: which one answers would be arbitrary. */
function findOverlaps(routes: readonly CompiledRoute[], configs: readonly RouteConfig[], problems: string[]): void {
  for (let i = 0; i < routes.length; i++) {
    for (let j = i + 1; j < routes.length; j++) {
      const a = routes[i] as CompiledRoute;
      const b = routes[j] as CompiledRoute;
      if (a.prefix !== b.prefix) continue;
      const shared = !a.methods || !b.methods || [...a.methods].some((method) => b.methods?.has(method));
      if (shared) {
        const index = (route: CompiledRoute) => configs.indexOf(route.config);
        problems.push(
          `routes[${index(b)}].match: same prefix '${b.config.match.prefix}' and methods as routes[${index(a)}]; give them different methods`,
        );
      }
    }
  }
}
