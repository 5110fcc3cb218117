import type { HttpMethod, RouteForward, RouteRecord } from "../../storage/route-records.js";
import { compilePathRewrite, type PathRewrite } from "./path-rewrite.js";
import { type CompiledCors, type CompiledPolicy, compilePolicies, type KeySource } from "./policy-compiler.js";
import type { Problems } from "./problems.js";
import { type CompiledUpstream, compileUpstream, type TlsFileReader } from "./upstream-compiler.js";

/** Where a route comes from: the configuration file (read-only through the API), or the API (stored). */
export type RouteSource = "config" | "api";

/** A route as the route table is built from it: a stored one, or one of the configuration file made into the same shape. */
export interface RouteDefinition extends Omit<RouteRecord, "createdAt" | "updatedAt" | "workspaceId"> {
  source: RouteSource;
  /** A stored route's workspace; absent for a configuration route (the workspace of its keyauth's first API). */
  workspaceId?: string;
}

/**
 * A route of the configuration file without an upstream: decision-only, the forward-auth door alone decides its
 * requests (the proxy in front of keygate forwards them; docs/forward-auth.md).
 */
export type DecisionOnlyDefinition = Omit<RouteDefinition, "upstream">;

/**
 * What deciding a request needs of a route, whether keygate forwards its requests or only decides them (the
 * forward-auth door): everything but its upstream. Immutable; a change builds a new table.
 */
export interface DecisionRoute {
  readonly definition: RouteDefinition | DecisionOnlyDefinition;
  /** true: a route without an upstream, which only the forward-auth door decides. */
  readonly decisionOnly: boolean;
  readonly id: string;
  readonly name: string;
  /** Without a trailing slash ("" for "/"), escaped unreserved characters decoded (see samePath). */
  readonly prefix: string;
  readonly methods: ReadonlySet<string> | undefined;
  /** The enabled policies, in order. */
  readonly policies: readonly CompiledPolicy[];
  /** Every place a key may come in, across its keyauth policies: never forwarded, never recorded. */
  readonly keySources: readonly KeySource[];
  /** The API whose workspace a configuration route belongs to (its first keyauth policy's first API). */
  readonly workspaceApiId: string | undefined;
  readonly forward: RouteForward;
  /** How the path sent upstream is made from the request's; undefined: as it came. */
  readonly pathRewrite: PathRewrite | undefined;
  /** Whether the upstream gets the client's Host rather than its own. */
  readonly clientHost: boolean;
  /** The largest request body in bytes; undefined: no limit of the route's. */
  readonly bodyLimit: number | undefined;
  /** The enabled cors policies, in order: the first that applies to a request decides. */
  readonly cors: readonly CompiledCors[];
}

/** A route ready to serve: decided, then forwarded to its upstream. */
export interface CompiledRoute extends DecisionRoute {
  readonly definition: RouteDefinition;
  readonly decisionOnly: false;
  /** The upstream's first target (the only one of a single URL). */
  readonly upstream: URL;
  /** Every target, how they are balanced, their health checks, retries and TLS. */
  readonly pool: CompiledUpstream;
  /** The upstream's path without trailing slashes ("" for none): request paths are appended to it. */
  readonly upstreamBase: string;
}

/** A route without an upstream: its requests are decided at the forward-auth door, never forwarded by keygate. */
export interface DecisionOnlyRoute extends DecisionRoute {
  readonly definition: DecisionOnlyDefinition;
  readonly decisionOnly: true;
}

/** Normalises a path prefix the way requests are compared with it; see samePath. */
export type PathNormaliser = (path: string) => string;

export interface RouteCompileRules {
  /** Whether a prefix is reserved (the management API's). */
  reserved(prefix: string): boolean;
  samePath: PathNormaliser;
  /** Reads an upstream's TLS files; without it a route with `upstream.tls` files does not compile. */
  readTlsFile?: TlsFileReader;
}

/**
 * Compiles one route, pushing each problem with its field under `at` (`routes[3]`, or "" for a route of the API);
 * undefined when there was any.
 */
export function compileRoute(
  definition: RouteDefinition,
  at: string,
  rules: RouteCompileRules,
  problems: Problems,
): CompiledRoute | undefined {
  const before = problems.length;
  const field = (name: string) => (at === "" ? name : `${at}.${name}`);
  const pool = compileUpstream(definition.upstream, field("upstream"), rules.readTlsFile, problems);
  const upstream = pool?.targets[0]?.url;
  const decided = compileDecision(definition, at, rules, problems);
  if (problems.length > before || !decided || !upstream || !pool) return undefined;
  return { ...decided, definition, decisionOnly: false, upstream, pool, upstreamBase: upstream.pathname.replace(/\/+$/, "") };
}

/** Compiles a decision-only route (no upstream) as compileRoute does the rest of one. */
export function compileDecisionOnlyRoute(
  definition: DecisionOnlyDefinition,
  at: string,
  rules: RouteCompileRules,
  problems: Problems,
): DecisionOnlyRoute | undefined {
  const decided = compileDecision(definition, at, rules, problems);
  return decided && { ...decided, definition, decisionOnly: true };
}

/** What every route compiles to but its upstream; undefined when it has problems. */
function compileDecision(
  definition: DecisionOnlyDefinition,
  at: string,
  rules: RouteCompileRules,
  problems: Problems,
): Omit<DecisionRoute, "definition" | "decisionOnly"> | undefined {
  const before = problems.length;
  const field = (name: string) => (at === "" ? name : `${at}.${name}`);
  const prefix = rules.samePath(definition.match.prefix.replace(/\/+$/, ""));
  // The schema has made sure the prefix starts with '/' (and an upstream is an http(s) URL with a host).
  if (rules.reserved(prefix))
    problems.push({ at: field("match.prefix"), message: `'${definition.match.prefix}' is reserved for the management API (/v2)` });
  if (/[?#]/.test(definition.match.prefix)) problems.push({ at: field("match.prefix"), message: "must be a path, without '?' or '#'" });

  const policies = compilePolicies(definition.policies, definition.name, field("policies"), problems);
  const keySources = policies.flatMap((policy) => (policy.kind === "keyauth" ? policy.keySources : []));
  const forward = definition.forward ?? {};
  const forwarded = Object.values(forward).map((header) => header.toLowerCase());
  if (new Set(forwarded).size !== forwarded.length) problems.push({ at: field("forward"), message: "two values share a header name" });
  for (const source of keySources) {
    if (source.kind === "header" && forwarded.includes(source.header)) {
      problems.push({ at: field("forward"), message: `'${source.header}' is a header a key is read from` });
    }
  }
  const pathRewrite = compilePathRewrite(prefix, definition.stripPrefix, definition.rewrite, field, problems);
  if (problems.length > before) return undefined;
  const firstKeyauth = definition.policies.find((policy) => policy.keyauth !== undefined)?.keyauth;
  return {
    id: definition.id,
    name: definition.name,
    prefix,
    methods: definition.match.methods ? new Set<HttpMethod>(definition.match.methods) : undefined,
    policies,
    keySources,
    workspaceApiId: firstKeyauth?.keyspaces[0],
    forward,
    pathRewrite,
    clientHost: definition.host === "client",
    bodyLimit: definition.bodyLimit,
    cors: policies.filter((policy) => policy.kind === "cors"),
  };
}
