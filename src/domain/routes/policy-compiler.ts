import { IpAllowlist, ipEntryProblem, MAX_IP_ALLOWLIST_ENTRIES } from "../../lib/ip-allowlist.js";
import type {
  KeyauthPolicy,
  KeyLocation,
  LoggingPolicy,
  PolicyRecord,
  RatelimitIdentifier,
  RatelimitPolicy,
} from "../../storage/route-records.js";
import { type PermissionQuery, PermissionQuerySyntaxError, parsePermissionQuery } from "../permissions/query.js";
import type { RequestedLimit, VerifyRequest } from "../verification/verification.js";
import { type CompiledCorsRule, compileCors } from "./cors-policy.js";
import { compileMatches, type RequestPredicate } from "./match-expressions.js";
import type { Problems } from "./problems.js";

/** Where a request's key is read from: a header (after a required scheme, or with an optional prefix stripped), or a query parameter. */
export type KeySource = { kind: "header"; header: string; scheme?: string; stripPrefix?: string } | { kind: "query"; parameter: string };

/**
 * One source of a rate limit identifier. `subject`: the key's identity, or the key when it has none. `keyId`: the
 * key. `principalField`: a field of the principal (docs/gateway.md#the-principal), by its dotted path.
 */
export type IdentifierSource =
  | { kind: "remoteIp" }
  | { kind: "header"; header: string }
  | { kind: "subject" }
  | { kind: "keyId" }
  | { kind: "path" }
  | { kind: "principalField"; path: readonly string[] };

interface CompiledPolicyBase {
  id: string;
  name: string;
  /** Every one must hold for the policy to apply (none: every request). */
  matches: readonly RequestPredicate[];
}

export interface CompiledKeyauth extends CompiledPolicyBase {
  kind: "keyauth";
  /** API ids or key space ids: a key of another API is NOT_FOUND. */
  keyspaces: ReadonlySet<string>;
  /** Tried in order; the first that holds a key is the one verified. */
  keySources: readonly KeySource[];
  permissionQuery?: PermissionQuery;
  ratelimits?: readonly RequestedLimit[];
  credits?: { cost: number };
}

/**
 * What a keyauth policy asks of the one verification path for `key` (the gateway's routes and the Fastify plugin's).
 * Each optional field is set only when the policy has it: assigned, not spread, as this runs for every request.
 */
export function keyauthVerifyRequest(
  keyauth: CompiledKeyauth,
  requestId: string,
  workspaceId: string,
  key: string,
  clientAddress: string | (() => string),
): VerifyRequest {
  const asked: VerifyRequest = { requestId, source: "gateway", workspaceId, key, keyspaces: keyauth.keyspaces, clientAddress };
  if (keyauth.permissionQuery) asked.permissions = keyauth.permissionQuery;
  if (keyauth.credits) asked.credits = keyauth.credits;
  if (keyauth.ratelimits) asked.ratelimits = keyauth.ratelimits;
  return asked;
}

export interface CompiledRatelimit extends CompiledPolicyBase {
  kind: "ratelimit";
  namespace: string;
  limit: number;
  durationMs: number;
  cost: number;
  identifiers: readonly IdentifierSource[];
}

export interface CompiledFirewall extends CompiledPolicyBase {
  kind: "firewall";
  /** Clients outside it are denied; absent: no client is spared for being in a list. */
  allow?: IpAllowlist;
  /** Clients within it are denied. */
  deny?: IpAllowlist;
}

export type CompiledPolicy =
  | CompiledKeyauth
  | CompiledRatelimit
  | CompiledFirewall
  | (CompiledPolicyBase & { kind: "openapi" })
  | (CompiledPolicyBase & { kind: "logging"; capture: LoggingPolicy })
  | CompiledCors;

/** keygate's own kind: CORS answered and added at the gateway. */
export interface CompiledCors extends CompiledPolicyBase {
  kind: "cors";
  rule: CompiledCorsRule;
}

export const POLICY_KINDS = ["keyauth", "ratelimit", "firewall", "openapi", "logging", "cors"] as const;
export type PolicyKind = (typeof POLICY_KINDS)[number];

export const MAX_POLICIES = 50;

/** The kind of a policy: which one of its rule fields is set (undefined when not exactly one is). */
export function policyKind(policy: Pick<PolicyRecord, PolicyKind>): PolicyKind | undefined {
  const set = POLICY_KINDS.filter((kind) => policy[kind] !== undefined);
  return set.length === 1 ? set[0] : undefined;
}

/**
 * The enabled policies of a route, compiled for the gateway, in order; each problem is pushed to `problems` with
 * its field under `at` (e.g. `policies`). `routeName` names the default namespace of its rate limit policies.
 */
export function compilePolicies(policies: readonly PolicyRecord[], routeName: string, at: string, problems: Problems): CompiledPolicy[] {
  if (policies.length > MAX_POLICIES) problems.push({ at: at, message: `must hold at most ${MAX_POLICIES} policies` });
  const compiled: CompiledPolicy[] = [];
  const names = new Map<string, number>();
  policies.forEach((policy, index) => {
    const where = `${at}[${index}]`;
    const earlier = names.get(policy.name);
    if (earlier !== undefined) problems.push({ at: `${where}.name`, message: `'${policy.name}' is also the name of ${at}[${earlier}]` });
    names.set(policy.name, index);
    const one = compilePolicy(policy, routeName, where, problems);
    if (one && policy.enabled) compiled.push(one);
  });
  return compiled;
}

function compilePolicy(policy: PolicyRecord, routeName: string, at: string, problems: Problems): CompiledPolicy | undefined {
  const before = problems.length;
  const matches = compileMatches(policy.match ?? [], `${at}.match`, problems);
  const kind = policyKind(policy);
  if (kind === undefined) {
    problems.push({ at: at, message: `must set exactly one of ${POLICY_KINDS.join(", ")}` });
    return undefined;
  }
  const base = { id: policy.id, name: policy.name, matches };
  let compiled: CompiledPolicy | undefined;
  if (policy.keyauth) compiled = compileKeyauth(policy.keyauth, base, `${at}.keyauth`, problems);
  else if (policy.ratelimit)
    compiled = compileRatelimit(policy.ratelimit, base, `${routeName}.${policy.name}`, `${at}.ratelimit`, problems);
  else if (policy.firewall) compiled = compileFirewall(policy.firewall, base, `${at}.firewall`, problems);
  else if (policy.openapi) compiled = { ...base, kind: "openapi" };
  else if (policy.logging) compiled = { ...base, kind: "logging", capture: policy.logging };
  else if (policy.cors) {
    const rule = compileCors(policy.cors, `${at}.cors`, problems);
    if (rule) compiled = { ...base, kind: "cors", rule };
  }
  return problems.length === before ? compiled : undefined;
}

/** A keyauth policy on its own, outside any route (a Fastify route's under the plugin); `name` names it. */
export function compileKeyRequirement(policy: KeyauthPolicy, name: string, at: string, problems: Problems): CompiledKeyauth | undefined {
  return compileKeyauth(policy, { id: name, name, matches: [] }, at, problems);
}

function compileKeyauth(policy: KeyauthPolicy, base: CompiledPolicyBase, at: string, problems: Problems): CompiledKeyauth | undefined {
  if (policy.keyspaces.length === 0 || policy.keyspaces.length > 5)
    problems.push({ at: `${at}.keyspaces`, message: "must name 1 to 5 APIs" });
  const keySources = (policy.locations ?? [{ bearer: {} }]).map((location, index) =>
    keySource(location, `${at}.locations[${index}]`, problems),
  );
  let permissionQuery: PermissionQuery | undefined;
  if (policy.permissionQuery !== undefined) {
    try {
      permissionQuery = parsePermissionQuery(policy.permissionQuery);
    } catch (error) {
      if (!(error instanceof PermissionQuerySyntaxError)) throw error;
      problems.push({ at: `${at}.permissionQuery`, message: `${error.message}` });
    }
  }
  const limitNames = new Set<string>();
  (policy.ratelimits ?? []).forEach((limit, index) => {
    const where = `${at}.ratelimits[${index}]`;
    if (limitNames.has(limit.name)) problems.push({ at: `${where}.name`, message: `'${limit.name}' is listed twice` });
    limitNames.add(limit.name);
    if ((limit.limit === undefined) !== (limit.duration === undefined))
      problems.push({ at: where, message: "must set limit and duration together, or neither" });
    costWithinLimit(limit, where, problems);
  });
  if (keySources.some((source) => source === undefined)) return undefined;
  const compiled: CompiledKeyauth = {
    ...base,
    kind: "keyauth",
    keyspaces: new Set(policy.keyspaces),
    keySources: keySources as KeySource[],
  };
  if (permissionQuery) compiled.permissionQuery = permissionQuery;
  if (policy.ratelimits) compiled.ratelimits = policy.ratelimits;
  if (policy.credits !== undefined) compiled.credits = { cost: policy.credits };
  return compiled;
}

function keySource(location: KeyLocation, at: string, problems: Problems): KeySource | undefined {
  const set = (["bearer", "header", "queryParam"] as const).filter((kind) => location[kind] !== undefined);
  if (set.length !== 1) {
    problems.push({ at: at, message: "must set exactly one of bearer, header or queryParam" });
    return undefined;
  }
  if (location.bearer) return { kind: "header", header: "authorization", scheme: "Bearer" };
  if (location.queryParam) return { kind: "query", parameter: location.queryParam.name };
  const header = location.header as NonNullable<KeyLocation["header"]>;
  const source: KeySource = { kind: "header", header: header.name.toLowerCase() };
  if (header.scheme) source.scheme = header.scheme;
  if (header.stripPrefix) source.stripPrefix = header.stripPrefix;
  return source;
}

function compileRatelimit(
  policy: RatelimitPolicy,
  base: CompiledPolicyBase,
  defaultNamespace: string,
  at: string,
  problems: Problems,
): CompiledRatelimit | undefined {
  if (policy.identifiers.length === 0 || policy.identifiers.length > 5)
    problems.push({ at: `${at}.identifiers`, message: "must hold 1 to 5 sources" });
  const identifiers = policy.identifiers.map((identifier, index) => identifierSource(identifier, `${at}.identifiers[${index}]`, problems));
  costWithinLimit(policy, at, problems);
  if (identifiers.some((identifier) => identifier === undefined)) return undefined;
  return {
    ...base,
    kind: "ratelimit",
    namespace: policy.namespace ?? defaultNamespace,
    limit: policy.limit,
    durationMs: policy.windowMs,
    cost: policy.cost ?? 1,
    identifiers: identifiers as IdentifierSource[],
  };
}

/** A cost above its limit refuses every request (an override raising the limit aside): refused as a mistake. */
export function costWithinLimit(limit: { limit?: number; cost?: number }, at: string, problems: Problems): void {
  if (limit.limit === undefined || limit.cost === undefined || limit.cost <= limit.limit) return;
  problems.push({ at: `${at}.cost`, message: `(${limit.cost}) is larger than limit (${limit.limit}): no request could ever pass` });
}

function identifierSource(identifier: RatelimitIdentifier, at: string, problems: Problems): IdentifierSource | undefined {
  const set = (["remoteIp", "header", "authenticatedSubject", "path", "principalField"] as const).filter(
    (kind) => identifier[kind] !== undefined,
  );
  if (set.length !== 1) {
    problems.push({ at: at, message: "must set exactly one of remoteIp, header, authenticatedSubject, path or principalField" });
    return undefined;
  }
  if (identifier.remoteIp) return { kind: "remoteIp" };
  if (identifier.header) return { kind: "header", header: identifier.header.name.toLowerCase() };
  if (identifier.authenticatedSubject) return { kind: "subject" };
  if (identifier.path) return { kind: "path" };
  const path = (identifier.principalField as { path: string }).path;
  // The principal's own key id counts as the key itself (the configuration file's identifier `key`).
  return path === "keyId" ? { kind: "keyId" } : { kind: "principalField", path: path.split(".") };
}

function compileFirewall(
  policy: NonNullable<PolicyRecord["firewall"]>,
  base: CompiledPolicyBase,
  at: string,
  problems: Problems,
): CompiledFirewall | undefined {
  const allow = addressList(policy.ipAllow, `${at}.ipAllow`, problems);
  const deny = addressList(policy.ipDeny, `${at}.ipDeny`, problems);
  const compiled: CompiledFirewall = { ...base, kind: "firewall" };
  if (allow) compiled.allow = allow;
  if (deny) compiled.deny = deny;
  return compiled;
}

function addressList(entries: readonly string[] | undefined, at: string, problems: Problems): IpAllowlist | undefined {
  if (entries === undefined) return undefined;
  if (entries.length === 0 || entries.length > MAX_IP_ALLOWLIST_ENTRIES) {
    problems.push({ at: at, message: `must hold 1 to ${MAX_IP_ALLOWLIST_ENTRIES} addresses or CIDR ranges` });
    return undefined;
  }
  const before = problems.length;
  entries.forEach((entry, index) => {
    const problem = ipEntryProblem(entry);
    if (problem) problems.push({ at: `${at}[${index}]`, message: `'${entry}' ${problem}` });
  });
  return problems.length === before ? new IpAllowlist(entries) : undefined;
}
