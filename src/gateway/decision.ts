import type { FastifyBaseLogger } from "fastify";
import type { ApiService } from "../domain/apis/api-service.js";
import { formatQuery } from "../domain/permissions/query.js";
import type { NamespaceLimitCheck, RatelimitService } from "../domain/ratelimit/ratelimit-service.js";
import { type CompiledKeyauth, type CompiledRatelimit, keyauthVerifyRequest } from "../domain/routes/policy-compiler.js";
import type { KeyView } from "../domain/verification/key-view.js";
import type { ValidVerification, Verification, VerificationCode } from "../domain/verification/verification.js";
import type { VerificationService } from "../domain/verification/verification-service.js";
import { ERROR_CATALOGUE, type ErrorCode } from "../errors/catalogue.js";
import { KeygateError } from "../errors/keygate-error.js";
import { malformedUrlError } from "../http/error-handler.js";
import { isManagementPath } from "../http/request-target.js";
import { DEFAULT_IPV6_PREFIX_LENGTH } from "../lib/address-prefix.js";
import { clientAddress } from "./client-address.js";
import { forwardRefusal, pathRefusal } from "./forwarding.js";
import type { AccessRequest, AccessRoute, GatewayRequest } from "./gateway-request.js";
import type { GatewaySnapshot } from "./gateway-snapshot.js";
import { extractKey } from "./key-extraction.js";
import { type ApplicablePolicies, applicablePolicies } from "./policy-plan.js";
import { ratelimitHeaders } from "./ratelimit-headers.js";
import { limitRequest } from "./ratelimit-identifiers.js";
import type { CompiledRoute, DecisionRoute } from "./route-table.js";

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
export type RouteMatch<R extends DecisionRoute = CompiledRoute> =
  | { kind: "route"; route: R }
  /** No route takes the path: the management API's, or one no route's prefix covers. The application answers it. */
  | { kind: "none" }
  /** A percent escape does not decode: refused as a malformed URL, wherever it was going. */
  | { kind: "undecodable" }
  /** Refused before any route could take it: a dot segment, or a method no route takes on a route's path. */
  | { kind: "refused"; error: KeygateError };

/** An allowed request: what forwarding it needs. */
export interface Allowed {
  kind: "allow";
  /** The route's workspace (absent: a configuration route with no API to say it). */
  workspaceId?: string;
  /** The key's verification, when a keyauth policy applied. */
  verification?: ValidVerification;
  /** The rate limit headers of the answer. */
  ratelimitHeaders: Record<string, string>;
}

/** A refusal; `workspaceId` is the route's workspace once looked up, `verification` the one that refused, if any. */
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
  readonly ratelimit: Pick<RatelimitService, "resolve" | "check">;
  readonly verification: Pick<VerificationService, "verify">;
}

/**
 * What the gateway does with a request, short of talking to the upstream: match a route, then run its policies.
 * What needs no store is decided first, in policy order (a firewall, where the key is); then the key, its limits,
 * the route's rate limits and the credits are decided in one all-or-nothing step on the one verification path, so
 * a refused request consumes nothing.
 */
export class GatewayDecider {
  private readonly services: DecisionServices;
  private readonly log: FastifyBaseLogger;
  /** The workspace of each API, kept once found (API ids are never reused); absences are not kept. */
  private readonly workspaces = new Map<string, string>();

  /** The IPv6 prefix a per-address rate limit counts a client by (`ratelimit.ipv6PrefixLength`). */
  private readonly ipv6PrefixLength: number;

  constructor(services: DecisionServices, log: FastifyBaseLogger, ipv6PrefixLength = DEFAULT_IPV6_PREFIX_LENGTH) {
    this.services = services;
    this.log = log;
    this.ipv6PrefixLength = ipv6PrefixLength;
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
      const error = new KeygateError(
        "err:keygate:gateway:invalid_path",
        `The request path has a ${refusal} ('.' or '..', also percent-encoded or between backslashes); keygate does not forward it.`,
      );
      return { kind: "refused", error };
    }
    const route = snapshot.table.match(method, path);
    if (route) return { kind: "route", route };
    return methodRefusal(snapshot.table.methodsFor(path), method, path) ?? NO_ROUTE;
  }

  /**
   * The route the forward-auth door decides an original request with: as match, among every route (decision-only
   * ones too), except that nothing is left to the application: a path no route takes is refused (404), never let
   * through, and so is one that does not decode.
   */
  matchAtDoor(snapshot: GatewaySnapshot, method: string, path: string): RouteMatch<DecisionRoute> {
    // The management API's paths are no route's: refused below as any path no route takes.
    const management = isManagementPath(path);
    const refusal = management ? undefined : pathRefusal(path);
    // As the inline gateway's: a URL that does not decode is malformed_url, a dot segment invalid_path.
    if (refusal === "undecodable") return { kind: "refused", error: malformedUrlError() };
    if (refusal) {
      const detail =
        "The original request's path has a dot segment ('.' or '..', also percent-encoded or between backslashes); keygate does not let it through.";
      return { kind: "refused", error: new KeygateError("err:keygate:gateway:invalid_path", detail) };
    }
    const route = management ? undefined : snapshot.table.matchDecision(method, path);
    if (route) return { kind: "route", route };
    const refused = management ? undefined : methodRefusal(snapshot.table.methodsFor(path, true), method, path);
    if (refused) return refused;
    const detail = `No route takes ${path}: keygate does not let the request through.`;
    return { kind: "refused", error: new KeygateError("err:keygate:gateway:no_route", detail) };
  }

  /**
   * Runs the policies of the route that took `request`: allowed, or denied with the reason. At the forward-auth
   * door nothing is forwarded and no body is read: the route's body limit, rewrite and an openapi policy's body check
   * do not apply there.
   */
  async decide(request: GatewayRequest, route: DecisionRoute): Promise<Decision> {
    // The client as the trusted proxies in front of keygate report it (`gateway.trustProxy`).
    const ip = () => clientAddress(request.remoteAddress, request.raw.headers["x-forwarded-for"], request.snapshot.trust);
    const early = request.forwardAuth ? undefined : forwardRefusal(route, request);
    if (early) return { kind: "deny", error: early };
    return this.access(request, route, ip);
  }

  /**
   * The access phase: a route's policies run for a request, whichever door it came through (the gateway's, or a
   * Fastify route's under the plugin), to allowed or denied. `ip` gives the client's address as that door trusts it.
   */
  async access(request: AccessRequest, route: AccessRoute, ip: () => string): Promise<Decision> {
    const applicable = applicablePolicies(route, request, ip);
    if (applicable.capture) request.capture = applicable.capture;
    // An openapi policy's check of the body (read whole) comes before any refusal of a later policy.
    const bodyRefusal = applicable.openApiBody && !request.forwardAuth ? await applicable.openApiBody() : undefined;
    if (bodyRefusal) return { kind: "deny", error: bodyRefusal };
    if (applicable.refusal) return { kind: "deny", error: applicable.refusal };
    const { keyauth } = applicable;
    const key = keyauth && extractKey(keyauth.keySources, request.raw.headers, request.query);
    if (keyauth && key === undefined) return missingKeyDenial(keyauth, route.name);

    // Known already for nearly every request: then no promise is awaited for it.
    const workspaceId = this.knownWorkspaceOfRoute(route) ?? (await this.workspaceOfRoute(route));
    if (workspaceId === undefined) {
      this.log.warn({ route: route.name, apiId: route.workspaceApiId }, "the route's API does not exist; every request is refused");
      return keyauth
        ? unknownApiDenial(keyauth, route.name)
        : { kind: "deny", error: new KeygateError("err:keygate:gateway:invalid_key", DENIALS.NOT_FOUND.detail) };
    }
    if (keyauth && key !== undefined) return this.verified(request, route, workspaceId, keyauth, key, applicable, ip);
    return this.counted(request, workspaceId, applicable.ratelimits, ip);
  }

  /** The key verified on the one verification path, the route's rate limits joining its atomic step. */
  private async verified(
    request: AccessRequest,
    route: AccessRoute,
    workspaceId: string,
    keyauth: CompiledKeyauth,
    key: string,
    applicable: ApplicablePolicies,
    ip: () => string,
  ): Promise<Decision> {
    const asked = keyauthVerifyRequest(keyauth, request.id, workspaceId, key, ip);
    if (route.tags) asked.tags = route.tags;
    const ratelimits = applicable.ratelimits;
    if (ratelimits.length > 0) {
      asked.extraLimits = (view: KeyView) => this.resolveLimits(workspaceId, ratelimits, request, ip, view);
    }
    const verification = await this.services.verification.verify(asked);
    if (!verification.valid) return verificationDenial(keyauth, route.name, workspaceId, verification);
    return {
      kind: "allow",
      workspaceId,
      verification,
      ratelimitHeaders: ratelimitHeaders(verification.limits, verification.decidedAt),
    };
  }

  /** A request without a key: the route's rate limits, all or nothing (a public route). */
  private async counted(
    request: AccessRequest,
    workspaceId: string,
    ratelimits: readonly CompiledRatelimit[],
    ip: () => string,
  ): Promise<Decision> {
    if (ratelimits.length === 0) return { kind: "allow", workspaceId, ratelimitHeaders: {} };
    const requests = ratelimits.map((policy) => limitRequest(policy, request, ip, undefined, this.ipv6PrefixLength));
    const outcome = await this.services.ratelimit.check(workspaceId, requests, { createMissingNamespaces: true, requestId: request.id });
    const headers = ratelimitHeaders(outcome.decisions, outcome.decidedAt);
    if (outcome.passed) return { kind: "allow", workspaceId, ratelimitHeaders: headers };
    const detail = "Too many requests: a rate limit of this route is exhausted.";
    return { kind: "deny", workspaceId, error: new KeygateError("err:keygate:gateway:rate_limited", detail, { headers }) };
  }

  /** The route's rate limits for this request and key, resolved (overrides applied) to join the key's atomic step. */
  private resolveLimits(
    workspaceId: string,
    ratelimits: readonly CompiledRatelimit[],
    request: AccessRequest,
    ip: () => string,
    view: KeyView,
  ): Promise<NamespaceLimitCheck[]> {
    const requests = ratelimits.map((policy) => limitRequest(policy, request, ip, view, this.ipv6PrefixLength));
    return this.services.ratelimit.resolve(workspaceId, requests, { createMissingNamespaces: true });
  }

  /** The workspace a route serves: a stored route's own, a configuration route's API's (undefined: it does not exist). */
  private async workspaceOfRoute(route: AccessRoute): Promise<string | undefined> {
    if (route.definition.workspaceId !== undefined) return route.definition.workspaceId;
    if (route.workspaceApiId === undefined) return undefined;
    return (await this.workspaceOf(route.workspaceApiId)) ?? undefined;
  }

  /** The workspace a route serves when no lookup is needed for it (a stored route's own, or an API's seen before). */
  private knownWorkspaceOfRoute(route: AccessRoute): string | undefined {
    if (route.definition.workspaceId !== undefined) return route.definition.workspaceId;
    return route.workspaceApiId === undefined ? undefined : this.workspaces.get(route.workspaceApiId);
  }

  /** The workspace of an API when this decider has looked it up before. */
  knownWorkspace(apiId: string): string | undefined {
    return this.workspaces.get(apiId);
  }

  /** The workspace of an API, looked up once; null when the API does not exist. */
  async workspaceOf(apiId: string): Promise<string | null> {
    const known = this.workspaces.get(apiId);
    if (known !== undefined) return known;
    const workspaceId = await this.services.apis.workspaceOf(apiId);
    if (workspaceId !== null) this.workspaces.set(apiId, workspaceId);
    return workspaceId;
  }
}

const NO_ROUTE: RouteMatch = { kind: "none" };

/** 405 for a method no route takes on a path some route's prefix covers (`allowed`: their methods); else undefined. */
function methodRefusal(allowed: readonly string[], method: string, path: string): { kind: "refused"; error: KeygateError } | undefined {
  if (allowed.length === 0) return undefined;
  const detail = `${method} is not allowed on ${path}; use ${allowed.join(" or ")}.`;
  const headers = { allow: allowed.join(", ") };
  return { kind: "refused", error: new KeygateError("err:user:bad_request:method_not_allowed", detail, { headers }) };
}
const UNDECODABLE: RouteMatch = { kind: "undecodable" };

/** Where a key is looked for and what it must hold: a keyauth policy's, or a Fastify route's under the plugin. */
export type KeyRequirement = Pick<CompiledKeyauth, "keySources" | "permissionQuery">;

/**
 * A verification that was not VALID, as the gateway answers it (the plugin too); `realm` names the route in the
 * `WWW-Authenticate` challenge.
 */
export function verificationDenial(
  keyauth: KeyRequirement,
  realm: string,
  workspaceId: string,
  verification: Exclude<Verification, ValidVerification>,
): Denied {
  const code = verification.code;
  const denial = DENIALS[code];
  const detail =
    code === "INSUFFICIENT_PERMISSIONS" && keyauth.permissionQuery
      ? `${denial.detail} It needs: ${formatQuery(keyauth.permissionQuery)}.`
      : denial.detail;
  const headers = code === "RATE_LIMITED" ? ratelimitHeaders(verification.limits, verification.decidedAt) : {};
  if (verification.code === "USAGE_EXCEEDED" && verification.nextRefillAt !== undefined) {
    headers["retry-after"] = String(Math.max(1, Math.ceil((verification.nextRefillAt - verification.decidedAt) / 1000)));
  }
  const denied = deny(keyauth, realm, denial.code, detail, headers);
  denied.workspaceId = workspaceId;
  denied.verification = verification;
  return denied;
}

/** A key for an API that does not exist: every key is refused as not found. */
export function unknownApiDenial(keyauth: KeyRequirement, realm: string): Denied {
  return deny(keyauth, realm, DENIALS.NOT_FOUND.code, DENIALS.NOT_FOUND.detail);
}

/** A request without a key where one is needed: a 401 saying where it goes. */
export function missingKeyDenial(keyauth: KeyRequirement, realm: string): Denied {
  return deny(keyauth, realm, "err:keygate:gateway:missing_key", missingKeyDetail(keyauth));
}

function deny(keyauth: KeyRequirement, realm: string, code: ErrorCode, detail: string, headers: Record<string, string> = {}): Denied {
  // Every 401 says where the key goes (RFC 9110).
  if (ERROR_CATALOGUE[code].status === 401) headers["www-authenticate"] = wwwAuthenticate(keyauth, realm);
  return { kind: "deny", error: new KeygateError(code, detail, { headers }) };
}

function missingKeyDetail(keyauth: KeyRequirement): string {
  const source = keyauth.keySources[0];
  if (source === undefined) return "This API needs an API key.";
  if (source.kind === "query") return `This API needs an API key in the '${source.parameter}' query parameter.`;
  if (source.scheme) return `This API needs an API key: send '${source.header}: ${source.scheme} <key>'.`;
  return `This API needs an API key in the '${source.header}' header.`;
}

/** RFC 9110 challenge naming where the key goes. */
function wwwAuthenticate(keyauth: KeyRequirement, realm: string): string {
  const source = keyauth.keySources[0];
  if (source?.kind === "header" && source.header === "authorization" && source.scheme) return `${source.scheme} realm="${realm}"`;
  const where =
    source?.kind === "query" ? `in="query", name="${source.parameter}"` : `in="header", name="${source?.header ?? "authorization"}"`;
  return `ApiKey realm="${realm}", ${where}`;
}
