import type { IncomingHttpHeaders } from "node:http";
import type { FastifyBaseLogger } from "fastify";
import type { ApiService } from "../domain/apis/api-service.js";
import { formatQuery } from "../domain/permissions/query.js";
import type { RatelimitService } from "../domain/ratelimit/ratelimit-service.js";
import type { KeyView } from "../domain/verification/key-view.js";
import type { ExtraLimit, Verification, VerificationCode } from "../domain/verification/verification.js";
import type { VerificationService } from "../domain/verification/verification-service.js";
import { ERROR_CATALOGUE, type ErrorCode } from "../errors/catalogue.js";
import { KeygateError } from "../errors/keygate-error.js";
import { defined } from "../lib/defined.js";
import { clientAddress } from "./client-address.js";
import { type ForwardedIdentity, pathRefusal } from "./forwarding.js";
import { extractKey } from "./key-extraction.js";
import { type AppliedLimit, ratelimitHeaders } from "./ratelimit-headers.js";
import type { GatewayState, RouteState } from "./route-state.js";
import { type CompiledRoute, type IdentifierSource, samePath } from "./route-table.js";

/** Denials of verification as the gateway answers them: status through the catalogue code, and why. */
const DENIALS: Record<Exclude<VerificationCode, "VALID">, { code: ErrorCode; detail: string }> = {
  NOT_FOUND: { code: "err:keygate:gateway:invalid_key", detail: "The API key is not valid for this API." },
  FORBIDDEN: { code: "err:keygate:gateway:ip_not_allowed", detail: "Requests with this API key are not allowed from this address." },
  DISABLED: { code: "err:keygate:gateway:key_disabled", detail: "The API key is disabled." },
  EXPIRED: { code: "err:keygate:gateway:key_expired", detail: "The API key has expired." },
  INSUFFICIENT_PERMISSIONS: {
    code: "err:keygate:gateway:insufficient_permissions",
    detail: "The API key lacks the permissions this route needs.",
  },
  RATE_LIMITED: { code: "err:keygate:gateway:rate_limited", detail: "Too many requests: a rate limit of this API key is exhausted." },
  USAGE_EXCEEDED: { code: "err:keygate:gateway:usage_exceeded", detail: "The API key has no credits left for this request." },
};

/** The parts of a request the gateway decides on; plain requests and WebSocket upgrades both have them. */
export interface GatewayRequest {
  id: string;
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  remoteAddress: string | undefined;
}

/** An allowed request: what forwarding it needs. */
export interface Allowed {
  kind: "allow";
  state: GatewayState;
  route: CompiledRoute;
  workspaceId: string;
  verification: Verification;
  caller: ForwardedIdentity;
  /** Rate limit headers of the response. */
  headers: Record<string, string>;
}

/** The services a gateway decision uses. */
export interface DecisionServices {
  readonly apis: Pick<ApiService, "workspaceOf">;
  readonly ratelimit: Pick<RatelimitService, "resolve">;
  readonly verification: Pick<VerificationService, "verify">;
}

/**
 * A refusal; `route` is the route that refused, when one matched, `workspaceId` its API's workspace once looked up,
 * and `verification` the verification that refused, when one was decided.
 */
export interface Denied {
  kind: "deny";
  error: KeygateError;
  route?: CompiledRoute;
  workspaceId?: string;
  verification?: Verification;
}

export type Decision = { kind: "unmatched"; route?: undefined } | Denied | Allowed;

/** A request a route takes, with the routes and settings it is served by. */
export interface Matched {
  route: CompiledRoute;
  state: GatewayState;
}

/**
 * What the gateway does with a request, short of talking to the upstream: match a route, extract the key and
 * verify it on the one verification path. Routes are read once per request, so a reload never changes a request
 * in flight.
 */
export class GatewayDecider {
  private readonly services: DecisionServices;
  private readonly state: RouteState;
  private readonly log: FastifyBaseLogger;
  /** The workspace of each route's API, kept once found (API ids are never reused); absences are not kept. */
  private readonly workspaces = new Map<string, string>();

  constructor(services: DecisionServices, state: RouteState, log: FastifyBaseLogger) {
    this.services = services;
    this.state = state;
    this.log = log;
  }

  /**
   * The route that takes the request with the current routes, or why none does: /v2 and unknown paths are
   * unmatched (the application answers them), bad paths and wrong methods refused. Synchronous: cheap enough to
   * ask of every request before anything else is done for it.
   */
  match(request: Pick<GatewayRequest, "method" | "url">): Matched | Exclude<Decision, Allowed> {
    const current = this.state.current;
    const route = matchRoute(current, request);
    return "kind" in route ? route : { route, state: current };
  }

  /** Verifies a matched request's key on the one verification path: allowed, or denied with the reason. */
  async verify(matched: Matched, request: GatewayRequest): Promise<Allowed | Denied> {
    const { route, state: current } = matched;
    const key = extractKey(route.keySource, request.headers, request.url);
    if (key === undefined) return deny(route, "err:keygate:gateway:missing_key", missingKeyDetail(route));
    const workspaceId = await this.workspaceOf(route.config.apiId);
    if (workspaceId === null) {
      this.log.warn({ route: route.name, apiId: route.config.apiId }, "the route's API does not exist; every key is refused");
      return deny(route, DENIALS.NOT_FOUND.code, DENIALS.NOT_FOUND.detail);
    }

    // The client as the trusted proxies in front of keygate report it (`gateway.trustProxy`), for identifier `ip`.
    const ip = () => clientAddress(request.remoteAddress, request.headers["x-forwarded-for"], current.trust);
    const verification = await this.services.verification.verify({
      requestId: request.id,
      source: "gateway",
      workspaceId,
      key,
      apiId: route.config.apiId,
      clientAddress: ip,
      ...defined({ permissions: route.permissionQuery, credits: route.config.credits, ratelimits: route.config.ratelimits }),
      ...(route.namespaceLimits.length > 0
        ? { extraLimits: (view: KeyView) => namespaceChecks(this.services, workspaceId, route, view, request, ip) }
        : {}),
    });
    if (verification.data.code !== "VALID") return { ...verificationDenial(route, verification), workspaceId, verification };
    const view = verification.key as KeyView;
    return {
      kind: "allow",
      state: current,
      route,
      workspaceId,
      verification,
      caller: { keyId: view.keyId, ...(view.identity ? { identityId: view.identity.id, externalId: view.identity.externalId } : {}) },
      headers: ratelimitHeaders(appliedLimits(verification), verification.decidedAt),
    };
  }

  /** The workspace of a route's API when this decider has looked it up before. */
  knownWorkspace(apiId: string): string | undefined {
    return this.workspaces.get(apiId);
  }

  /** The workspace of a route's API, looked up once; null when the API does not exist. */
  async workspaceOf(apiId: string): Promise<string | null> {
    const known = this.workspaces.get(apiId);
    if (known !== undefined) return known;
    const workspaceId = await this.services.apis.workspaceOf(apiId);
    if (workspaceId !== null) this.workspaces.set(apiId, workspaceId);
    return workspaceId;
  }
}

/** The route that takes the request, or why none does: /v2 and unknown paths are unmatched, bad paths refused. */
function matchRoute(current: GatewayState, request: Pick<GatewayRequest, "method" | "url">): CompiledRoute | Exclude<Decision, Allowed> {
  const path = request.url.split("?", 1)[0] as string;
  const same = samePath(path);
  if (same === "/v2" || same.startsWith("/v2/")) return { kind: "unmatched" };
  // Decided before anything is charged: such a path is never forwarded (see pathRefusal).
  const refusal = pathRefusal(path);
  if (refusal) {
    const error = new KeygateError("err:keygate:gateway:invalid_path", `The request path ${refusal}; keygate does not forward it.`);
    return { kind: "deny", error };
  }
  const route = current.table.match(request.method, path);
  if (route) return route;
  const allowed = current.table.methodsFor(path);
  if (allowed.length === 0) return { kind: "unmatched" };
  const detail = `${request.method} is not allowed on ${path}; use ${allowed.join(" or ")}.`;
  return {
    kind: "deny",
    error: new KeygateError("err:user:bad_request:method_not_allowed", detail, { headers: { allow: allowed.join(", ") } }),
  };
}

/** A verification that was not VALID, as the gateway answers it. */
function verificationDenial(route: CompiledRoute, verification: Verification): Denied {
  const code = verification.data.code as Exclude<VerificationCode, "VALID">;
  const denial = DENIALS[code];
  const detail =
    code === "INSUFFICIENT_PERMISSIONS" && route.permissionQuery
      ? `${denial.detail} It needs: ${formatQuery(route.permissionQuery)}.`
      : denial.detail;
  const headers = code === "RATE_LIMITED" ? ratelimitHeaders(appliedLimits(verification), verification.decidedAt) : {};
  if (code === "USAGE_EXCEEDED" && verification.nextRefillAt !== undefined) {
    headers["retry-after"] = String(Math.max(1, Math.ceil((verification.nextRefillAt - verification.decidedAt) / 1000)));
  }
  return deny(route, denial.code, detail, headers);
}

function deny(route: CompiledRoute, code: ErrorCode, detail: string, headers: Record<string, string> = {}): Denied {
  // Every 401 says where the key goes (RFC 9110).
  if (ERROR_CATALOGUE[code].status === 401) headers["www-authenticate"] = wwwAuthenticate(route);
  return { kind: "deny", error: new KeygateError(code, detail, { headers }), route };
}

/** The limits a verification checked, for the rate limit headers. */
function appliedLimits(verification: Verification): AppliedLimit[] {
  return verification.limits.map((limit) => ({
    name: limit.name,
    limit: limit.limit,
    remaining: limit.result.remaining,
    durationMs: limit.durationMs,
    resetAt: limit.result.resetAt,
    passed: limit.result.passed,
  }));
}

/** The route's namespace limits for this request, resolved (overrides applied) to join the key's atomic step. */
async function namespaceChecks(
  services: DecisionServices,
  workspaceId: string,
  route: CompiledRoute,
  view: KeyView,
  request: GatewayRequest,
  ip: () => string,
): Promise<ExtraLimit[]> {
  const requests = route.namespaceLimits.map((limit) => ({
    namespace: limit.namespace,
    identifier: identifierFor(limit.identifier, view, request, ip),
    limit: limit.limit,
    durationMs: limit.durationMs,
    cost: limit.cost,
  }));
  const resolved = await services.ratelimit.resolve(workspaceId, requests, { createMissingNamespaces: true });
  return resolved.map(({ request, ...limit }) => ({ name: request.namespace, ...limit }));
}

/**
 * What a namespace limit counts for this request. A key without an identity counts as itself; a request without
 * the named header counts in one shared bucket, "-". `ip` gives the client address, worked out only when asked.
 */
function identifierFor(source: IdentifierSource, view: KeyView, request: GatewayRequest, ip: () => string): string {
  switch (source.kind) {
    case "key":
      return view.keyId;
    case "identity":
      return view.identity?.id ?? view.keyId;
    case "ip":
      return ip();
    case "header": {
      const value = request.headers[source.header];
      const text = (Array.isArray(value) ? value[0] : value)?.trim();
      return text ? text.slice(0, 255) : "-";
    }
  }
}

function missingKeyDetail(route: CompiledRoute): string {
  const source = route.keySource;
  if (source.kind === "query") return `This API needs an API key in the '${source.parameter}' query parameter.`;
  if (source.scheme) return `This API needs an API key: send '${source.header}: ${source.scheme} <key>'.`;
  return `This API needs an API key in the '${source.header}' header.`;
}

/** RFC 9110 challenge naming where the key goes. */
function wwwAuthenticate(route: CompiledRoute): string {
  const source = route.keySource;
  if (source.kind === "header" && source.header === "authorization" && source.scheme) return `${source.scheme} realm="${route.name}"`;
  const where = source.kind === "query" ? `in="query", name="${source.parameter}"` : `in="header", name="${source.header}"`;
  return `ApiKey realm="${route.name}", ${where}`;
}
