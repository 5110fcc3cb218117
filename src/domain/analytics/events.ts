/**
 * The contract between verification (keys.verifyKey and the gateway) and analytics: every verification becomes
 * one VerificationEvent handed to a VerificationEventSink, which stores it as one row of `key_verifications_v1`.
 */

export type VerificationOutcome =
  | "VALID"
  | "NOT_FOUND"
  | "FORBIDDEN"
  | "INSUFFICIENT_PERMISSIONS"
  | "USAGE_EXCEEDED"
  | "RATE_LIMITED"
  | "DISABLED"
  | "EXPIRED";

export interface VerificationEvent {
  requestId: string; // req_…
  time: number; // unix ms
  workspaceId: string;
  keySpaceId: string; // "" when unknown (key not found)
  keyId: string; // "" when unknown
  identityId: string; // "" when none
  externalId: string; // "" when none
  outcome: VerificationOutcome;
  tags: string[];
  spentCredits: number;
  latencyMs: number; // time spent verifying
}

/** Where verification events go. record() never throws and never waits: it is called on the request path. */
export interface VerificationEventSink {
  record(event: VerificationEvent): void;
}
