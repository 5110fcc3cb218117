import type { IncomingMessage, OutgoingHttpHeaders } from "node:http";
import type { CompiledCors } from "../domain/routes/policy-compiler.js";
import type { RequestTarget } from "../http/request-target.js";
import { HTTP_METHODS } from "../storage/route-records.js";
import type { RouteMatch } from "./decision.js";
import type { AccessRequest, AccessRoute, GatewayRequest } from "./gateway-request.js";
import { matchedRequest } from "./policy-plan.js";

// A route's cors policy (docs/gateway.md#cors): a preflight is answered here, without a key and without the
// upstream; every other answer of the route (the upstream's, and keygate's own refusals) gets the CORS headers, so a
// page on another origin can read keygate's 401 or 429 rather than see an opaque CORS failure.

/** A CORS preflight a route's cors policy answers: the route that takes the method it asks about, and the policy. */
export interface Preflight {
  match: Extract<RouteMatch, { kind: "route" }>;
  policy: CompiledCors;
}

/**
 * The preflight `raw` is (OPTIONS with `Origin` and `Access-Control-Request-Method`), when the route that takes the
 * method it asks about has a cors policy for it; undefined otherwise (an OPTIONS request like any other).
 */
export function preflightOf(raw: IncomingMessage, target: RequestTarget, match: (method: string) => RouteMatch): Preflight | undefined {
  if (raw.method !== "OPTIONS") return undefined;
  const asked = raw.headers["access-control-request-method"];
  if (raw.headers.origin === undefined || asked === undefined) return undefined;
  const found = match(asked);
  if (found.kind !== "route") return undefined;
  const policy = applicableCors(found.route, { raw, path: target.path, query: target.query, method: asked });
  return policy && { match: found, policy };
}

/** Notes the CORS headers of every answer to `request` (the policy that applies, found unless given). */
export function noteCors(request: AccessRequest, route: Pick<AccessRoute, "cors">, policy = applicableCors(route, request)): void {
  if (policy === undefined) return;
  const rule = policy.rule;
  // Every answer of the route depends on the Origin: caches must keep them apart.
  const headers: Record<string, string> = { vary: "Origin" };
  request.cors = headers;
  const origin = request.raw.headers.origin;
  if (origin === undefined || !rule.allows(origin)) return;
  // `*` cannot go with credentials (browsers refuse it): such a policy names the origin.
  headers["access-control-allow-origin"] = rule.anyOrigin ? "*" : origin;
  if (rule.credentials) headers["access-control-allow-credentials"] = "true";
  headers["access-control-expose-headers"] = rule.exposeHeaders;
}

/** The head of a preflight's 204, or undefined when its origin is not allowed (no CORS header at all then). */
export function preflightHeaders(preflight: Preflight, request: GatewayRequest): Record<string, string> | undefined {
  return preflightAnswer(preflight.policy, preflight.match.route.methods, request);
}

/**
 * The head of the 204 `policy` answers a preflight with, for a route that takes `methods` (every method when
 * undefined), once noteCors has noted the request's CORS headers; undefined when its origin is not allowed.
 */
export function preflightAnswer(
  policy: CompiledCors,
  methods: Iterable<string> | undefined,
  request: Pick<AccessRequest, "id" | "raw" | "cors">,
): Record<string, string> | undefined {
  const cors = request.cors;
  if (cors?.["access-control-allow-origin"] === undefined) return undefined;
  const { rule } = policy;
  const headers: Record<string, string> = {
    "x-request-id": request.id,
    vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
    "access-control-allow-origin": cors["access-control-allow-origin"],
    "access-control-allow-methods": rule.allowMethods ?? [...(methods ?? HTTP_METHODS)].join(", "),
  };
  if (rule.credentials) headers["access-control-allow-credentials"] = "true";
  const asked = request.raw.headers["access-control-request-headers"];
  const allowHeaders = rule.allowHeaders ?? asked;
  if (allowHeaders !== undefined && allowHeaders !== "") headers["access-control-allow-headers"] = allowHeaders;
  if (rule.maxAge !== undefined) headers["access-control-max-age"] = rule.maxAge;
  headers["content-length"] = "0";
  return headers;
}

/** Puts the route's CORS headers on an answer's head: the policy decides, so the upstream's own are dropped. */
export function addCorsHeaders(head: OutgoingHttpHeaders, cors: Record<string, string>): void {
  const vary = head.vary;
  for (const name in head) if (name.startsWith("access-control-")) delete head[name];
  for (const name in cors) head[name] = cors[name];
  if (vary !== undefined) {
    const earlier = Array.isArray(vary) ? vary.join(", ") : String(vary);
    head.vary = /(^|,)\s*(origin|\*)\s*(,|$)/i.test(earlier) ? earlier : `${earlier}, Origin`;
  }
}

/** The first cors policy of `route` whose match expressions hold for `request` (as `method`, for a preflight). */
export function applicableCors(
  route: Pick<AccessRoute, "cors">,
  request: Pick<AccessRequest, "raw" | "path" | "query" | "method">,
  method = request.method,
): CompiledCors | undefined {
  const policies = route.cors;
  if (policies.length === 0) return undefined;
  let matched: ReturnType<typeof matchedRequest> | undefined;
  for (const policy of policies) {
    if (policy.matches.length === 0) return policy;
    matched ??= matchedRequest(request, method);
    const view = matched;
    if (policy.matches.every((holds) => holds(view))) return policy;
  }
  return undefined;
}
