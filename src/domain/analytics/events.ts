import type { VerificationCode } from "../verification/codes.js";

/**
 * The contract between what keygate decides and analytics: every verification (keys.verifyKey and the gateway),
 * every rate limit decision (ratelimit.limit, multiLimit and the gateway's namespace limits) and every request the
 * gateway answers becomes one event handed to its sink, which stores it as one row of its raw table
 * (`key_verifications_v1`, `ratelimits_v1`, `gateway_requests_v1`); so does every refund of a verification's credits
 * (`credit_refunds_v1`), which usage subtracts.
 */

export interface VerificationEvent {
  requestId: string; // req_…
  time: number; // unix ms
  workspaceId: string;
  keySpaceId: string; // "" when unknown (key not found)
  keyId: string; // "" when unknown
  identityId: string; // "" when none
  externalId: string; // "" when none
  outcome: VerificationCode;
  tags: string[];
  spentCredits: number;
  /** Which balance paid `spentCredits`: the key's own or its identity's; "" when nothing was spent. */
  creditsSource: "key" | "identity" | "";
  latencyMs: number; // time spent verifying
}

/**
 * Credits a verification spent that were given back to the balance that paid them (the gateway, when the upstream
 * never had the request: gateway/upstream-failure.ts). It names the verification it refunds by its request and
 * time, so usage subtracts it in the period the verification is counted in (docs/usage.md#refunds).
 */
export interface CreditRefundEvent {
  requestId: string; // the refunded verification's
  time: number; // unix ms, the refunded verification's (decidedAt)
  refundedAt: number; // unix ms, when the balance got the credits back
  workspaceId: string;
  keySpaceId: string;
  keyId: string;
  identityId: string; // "" when none
  externalId: string; // "" when none
  credits: number; // given back, as many as the verification spent
  /** The balance that paid and got them back. */
  creditsSource: "key" | "identity";
}

/** One identifier checked against one namespace limit. */
export interface RatelimitEvent {
  requestId: string;
  time: number; // unix ms
  workspaceId: string;
  namespaceId: string; // rlns_…
  identifier: string;
  passed: boolean;
  latencyMs: number; // time the decision took
  overrideId: string; // "" when no override applied
  limit: number; // the limit applied (the override's, when one matched)
  remaining: number;
  resetAt: number; // unix ms
  tokens: number; // the cost asked for
}

/**
 * One request the gateway answered: forwarded, or refused by keygate. Never a key; bodies only for a route that
 * opts in.
 */
export interface GatewayRequestEvent {
  requestId: string;
  time: number; // unix ms, when the request arrived
  workspaceId: string; // the route's API's workspace
  apiId: string;
  route: string; // the route's name (the table's app_id)
  method: string;
  host: string;
  path: string; // without the query string
  queryString: string; // the raw query string without `?`, the key's parameter redacted
  responseStatus: number;
  userAgent: string;
  ipAddress: string; // the client, as the trusted-proxy rules establish it
  totalLatencyMs: number; // arrival to the end of the answer
  upstreamLatencyMs: number; // arrival of the upstream's answer minus its sending; 0 when not forwarded
  gatewayLatencyMs: number; // total minus upstream
  keyId: string; // "" when no key was found
  outcome: VerificationCode | ""; // "" when no verification decided (no key given, or a failure before it)
  /** `Name: value` pairs, only for a route that opts in (its `analytics.headers`), secrets redacted; else empty. */
  requestHeaders: string[];
  responseHeaders: string[];
  /**
   * The start of the request's body as forwarded and of the answer's body as the client got it, as UTF-8 text, only
   * for a route whose logging policy asks (`requestBody`, `responseBody`), stored as sent; else "". The gateway
   * captures a bounded part and marks a body it cut (gateway/body-capture.ts).
   */
  requestBody: string;
  responseBody: string;
}

/** Where events go. record() never throws and never waits: it is called on the request path. */
export interface EventSink<E> {
  record(event: E): void;
}

export type VerificationEventSink = EventSink<VerificationEvent>;

/** One sink per kind of event. */
export interface AnalyticsSinks {
  verifications: EventSink<VerificationEvent>;
  ratelimits: EventSink<RatelimitEvent>;
  gatewayRequests: EventSink<GatewayRequestEvent>;
  creditRefunds: EventSink<CreditRefundEvent>;
}
