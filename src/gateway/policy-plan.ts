import type { MatchedRequest } from "../domain/routes/match-expressions.js";
import type { CompiledKeyauth, CompiledRatelimit } from "../domain/routes/policy-compiler.js";
import { KeygateError } from "../errors/keygate-error.js";
import { samePath } from "../http/request-target.js";
import type { LoggingPolicy } from "../storage/route-records.js";
import type { GatewayRequest } from "./gateway-request.js";
import { openApiStep } from "./openapi-policy.js";
import type { DecisionRoute } from "./route-table.js";

/** What a route's policies come to for one request, before anything is asked of a store. */
export interface ApplicablePolicies {
  /** The first refusal that needs no store (a firewall), in policy order. */
  refusal?: KeygateError;
  /** The first keyauth policy that applies; later ones are skipped. */
  keyauth?: CompiledKeyauth;
  /** Every rate limit policy that applies, in order. */
  ratelimits: readonly CompiledRatelimit[];
  /** What the request's analytics event captures, every logging policy that applies combined. */
  capture?: LoggingPolicy;
  /**
   * The check of the request body by an openapi policy that applies (the body read whole first); it comes before
   * `refusal` in policy order, so it runs first.
   */
  openApiBody?: () => Promise<KeygateError | undefined>;
}

/**
 * The policies of `route` that apply to `request`: each one enabled whose match expressions all hold, in order,
 * up to the first refusal. `ip` gives the client address, worked out only when a firewall asks.
 */
export function applicablePolicies(route: DecisionRoute, request: GatewayRequest, ip: () => string): ApplicablePolicies {
  const ratelimits: CompiledRatelimit[] = [];
  const applicable: ApplicablePolicies = { ratelimits };
  let matched: MatchedRequest | undefined;
  let openApiChecked = false;
  for (const policy of route.policies) {
    if (policy.matches.length > 0) {
      matched ??= matchedRequest(request);
      const view = matched;
      if (!policy.matches.every((holds) => holds(view))) continue;
    }
    switch (policy.kind) {
      case "firewall": {
        const address = policy.allow || policy.deny ? ip() : "";
        const denied = (!policy.allow && !policy.deny) || policy.deny?.allows(address) === true || policy.allow?.allows(address) === false;
        if (denied) {
          applicable.refusal = new KeygateError(
            "err:keygate:gateway:request_denied",
            `The route's policy '${policy.name}' denies this request.`,
          );
          return applicable;
        }
        break;
      }
      case "keyauth":
        applicable.keyauth ??= policy;
        break;
      case "ratelimit":
        ratelimits.push(policy);
        break;
      case "cors":
        // Answered and added around the decision, not a part of it (cors.ts).
        break;
      case "logging":
        applicable.capture = combinedCapture(applicable.capture, policy.capture);
        break;
      case "openapi": {
        // Every openapi policy validates against the route's one document: the first that applies decides.
        if (openApiChecked) break;
        openApiChecked = true;
        // No document uploaded (or none that compiled): the policy lets requests through.
        const document = request.snapshot.openApi.get(route.id);
        const step = document && openApiStep(document, route, request);
        if (step === undefined) break;
        if ("refusal" in step) {
          applicable.refusal = step.refusal;
          return applicable;
        }
        applicable.openApiBody = step.body;
        break;
      }
    }
  }
  return applicable;
}

/**
 * The parts of a request match expressions read; the query string is parsed only when one asks for a parameter.
 * `method` stands in for the request's (a CORS preflight is matched as the request it asks about).
 */
export function matchedRequest(
  request: Pick<GatewayRequest, "raw" | "path" | "query" | "method">,
  method = request.method,
): MatchedRequest {
  let query: URLSearchParams | undefined;
  const headers = request.raw.headers;
  return {
    method,
    path: samePath(request.path),
    header: (name) => {
      const value = headers[name];
      return Array.isArray(value) ? value[0] : value;
    },
    queryParam: (name) => {
      query ??= new URLSearchParams(request.query);
      return query.get(name) ?? undefined;
    },
  };
}

/** What several logging policies capture together: whatever any of them asks for. */
function combinedCapture(earlier: LoggingPolicy | undefined, next: LoggingPolicy): LoggingPolicy {
  if (earlier === undefined) return next;
  const combined: LoggingPolicy = {};
  for (const field of ["requestHeaders", "responseHeaders", "requestBody", "responseBody", "query"] as const) {
    if (earlier[field] || next[field]) combined[field] = true;
  }
  return combined;
}
