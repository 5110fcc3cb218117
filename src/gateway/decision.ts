import type { FastifyBaseLogger } from "fastify";
import type { ApiService } from "../domain/apis/api-service.js";
import { formatQuery } from "../domain/permissions/query.js";
import type { NamespaceLimitCheck, RatelimitService } from "../domain/ratelimit/ratelimit-service.js";
import type { KeyView } from "../domain/verification/key-view.js";
import type { ValidVerification, Verification, VerificationCode, VerifyRequest } from "../domain/verification/verification.js";
import type { VerificationService } from "../domain/verification/verification-service.js";
import { ERROR_CATALOGUE, type ErrorCode } from "../errors/catalogue.js";
import { KeygateError } from "../errors/keygate-error.js";
import { isManagementPath } from "../http/request-target.js";
import { clientAddress } from "./client-address.js";
import { pathRefusal } from "./forwarding.js";
import type { GatewayRequest } from "./gateway-request.js";
import type { GatewaySnapshot } from "./gateway-snapshot.js";
import { extractKey } from "./key-extraction.js";
import { ratelimitHeaders } from "./ratelimit-headers.js";
import type { CompiledRoute, IdentifierSource } from "./route-table.js";

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

/** What a request's path and method come to with the routes in force. */
export type RouteMatch =
  | { kind: "route"; route: CompiledRoute }
  /** No route takes the path: the management API's, or one no route's prefix covers. The application answers it. */
  | { kind: "none" }
  /** A percent escape does not decode: refused as a malformed URL, wherever it was going. */
  | { kind: "undecodable" }
  /** Refused before any route could take it: a dot segment, or a method no route takes on a route's path. */
  | { kind: "refused"; error: KeygateError };

/** An allowed request: what forwarding it needs. */
export interface Allowed {
  kind: "allow";
  workspaceId: string;
  verification: ValidVerification;
  /** The rate limit headers of the answer. */
  ratelimitHeaders: Record<string, string>;
}

/** A refusal; `workspaceId` is the route's API's workspace once looked up, `verification` the one that refused, if any. */
export interface Denied {
  kind: "deny";
  error: KeygateError;
  workspaceId?: string;
  verification?: Verification;
}

export type Decision = Allowed | Denied;

/** The services a gateway decision uses. */
export interface DecisionServices {
  readonly apis: Pick<ApiService, "workspaceOf">;
  readonly ratelimit: Pick<RatelimitService, "resolve">;
  readonly verification: Pick<VerificationService, "verify">;
}

/**
 * What the gateway does with a request, short of talking to the upstream: match a route, extract the key and
 * verify it on the one verification path.
 */
export class GatewayDecider {
  private readonly services: DecisionServices;
  private readonly log: FastifyBaseLogger;
  /** The workspace of each route's API, kept once found (API ids are never reused); absences are not kept. */
  private readonly workspaces = new Map<string, string>();

  constructor(services: DecisionServices, log: FastifyBaseLogger) {
    this.services = services;
    this.log = log;
  }

  /**
   * The route that takes a request with these routes, or why none does. Synchronous: cheap enough to ask of every
   * request before anything else is done for it.
   */
  match(snapshot: GatewaySnapshot, method: string, path: string): RouteMatch {
    if (isManagementPath(path)) return NO_ROUTE;
    // Decided before anything is charged: such a path is never forwarded (see pathRefusal).
    const refusal = pathRefusal(path);
    if (refusal === "undecodable") return UNDECODABLE;
    if (refusal) {
      const error = new KeygateError("err:keygate:gateway:invalid_path", `The request path ${refusal}; keygate does not forward it.`);
      return { kind: "refused", error };
    }
    const route = snapshot.table.match(method, path);
    if (route) return { kind: "route", route };
    const allowed = snapshot.table.methodsFor(path);
    if (allowed.length === 0) return NO_ROUTE;
    const detail = `${method} is not allowed on ${path}; use ${allowed.join(" or ")}.`;
    const headers = { allow: allowed.join(", ") };
    return { kind: "refused", error: new KeygateError("err:user:bad_request:method_not_allowed", detail, { headers }) };
  }

  /** Verifies the key of a request `route` took, on the one verification path: allowed, or denied with the reason. */
  async verify(request: GatewayRequest, route: CompiledRoute): Promise<Decision> {
    const key = extractKey(route.keySource, request.raw.headers, request.query);
    if (key === undefined) return deny(route, "err:keygate:gateway:missing_key", missingKeyDetail(route));
    const workspaceId = await this.workspaceOf(route.config.apiId);
    if (workspaceId === null) {
      this.log.warn({ route: route.name, apiId: route.config.apiId }, "the route's API does not exist; every key is refused");
      return deny(route, DENIALS.NOT_FOUND.code, DENIALS.NOT_FOUND.detail);
    }

    // The client as the trusted proxies in front of keygate report it (`gateway.trustProxy`), for identifier `ip`.
    const ip = () => clientAddress(request.remoteAddress, request.raw.headers["x-forwarded-for"], request.snapshot.trust);
    const asked: VerifyRequest = {
      requestId: request.id,
      source: "gateway",
      workspaceId,
      key,
      apiId: route.config.apiId,
      clientAddress: ip,
    };
    // Each optional field is set only when the route has it (a spread here would cost every request microseconds).
    if (route.permissionQuery) asked.permissions = route.permissionQuery;
    if (route.config.credits) asked.credits = route.config.credits;
    if (route.config.ratelimits) asked.ratelimits = route.config.ratelimits;
    if (route.namespaceLimits.length > 0) {
      asked.extraLimits = (view: KeyView) => namespaceChecks(this.services, workspaceId, route, view, request, ip);
    }
    const verification = await this.services.verification.verify(asked);
    if (!verification.valid) return verificationDenial(route, workspaceId, verification);
    return {
      kind: "allow",
      workspaceId,
      verification,
      ratelimitHeaders: ratelimitHeaders(verification.limits, verification.decidedAt),
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

const NO_ROUTE: RouteMatch = { kind: "none" };
const UNDECODABLE: RouteMatch = { kind: "undecodable" };

/** A verification that was not VALID, as the gateway answers it. */
function verificationDenial(route: CompiledRoute, workspaceId: string, verification: Exclude<Verification, ValidVerification>): Denied {
  const code = verification.code;
  const denial = DENIALS[code];
  const detail =
    code === "INSUFFICIENT_PERMISSIONS" && route.permissionQuery
      ? `${denial.detail} It needs: ${formatQuery(route.permissionQuery)}.`
      : denial.detail;
  const headers = code === "RATE_LIMITED" ? ratelimitHeaders(verification.limits, verification.decidedAt) : {};
  if (verification.code === "USAGE_EXCEEDED" && verification.nextRefillAt !== undefined) {
    headers["retry-after"] = String(Math.max(1, Math.ceil((verification.nextRefillAt - verification.decidedAt) / 1000)));
  }
  const denied = deny(route, denial.code, detail, headers);
  denied.workspaceId = workspaceId;
  denied.verification = verification;
  return denied;
}

function deny(route: CompiledRoute, code: ErrorCode, detail: string, headers: Record<string, string> = {}): Denied {
  // Every 401 says where the key goes (RFC 9110).
  if (ERROR_CATALOGUE[code].status === 401) headers["www-authenticate"] = wwwAuthenticate(route);
  return { kind: "deny", error: new KeygateError(code, detail, { headers }) };
}

/** The route's namespace limits for this request, resolved (overrides applied) to join the key's atomic step. */
async function namespaceChecks(
  services: DecisionServices,
  workspaceId: string,
  route: CompiledRoute,
  view: KeyView,
  request: GatewayRequest,
  ip: () => string,
): Promise<NamespaceLimitCheck[]> {
  const requests = route.namespaceLimits.map((limit) => ({
    namespace: limit.namespace,
    identifier: identifierFor(limit.identifier, view, request, ip),
    limit: limit.limit,
    durationMs: limit.durationMs,
    cost: limit.cost,
  }));
  return services.ratelimit.resolve(workspaceId, requests, { createMissingNamespaces: true });
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
      const value = request.raw.headers[source.header];
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
