import type { WindowResult } from "../../storage/interfaces.js";
import type { VerificationSource } from "../observer.js";
import type { PermissionQuery } from "../permissions/query.js";
import type { NamespaceCheck } from "../ratelimit/namespace-resolver.js";
import type { KeyDescription, KeyView } from "./key-view.js";

// What a verification is asked and what it answers, for keys.verifyKey and the gateway alike.

/**
 * What a verification answers (api-decisions.md). Every one but VALID is a denial. Analytics records each as the
 * outcome of the same name. FORBIDDEN: the client's address is outside the API's IP allowlist.
 */
export type VerificationCode =
  | "VALID"
  | "NOT_FOUND"
  | "FORBIDDEN"
  | "DISABLED"
  | "EXPIRED"
  | "INSUFFICIENT_PERMISSIONS"
  | "RATE_LIMITED"
  | "USAGE_EXCEEDED";

export interface RequestedLimit {
  name: string;
  /** Units this request takes (default 1; 0 checks without consuming). */
  cost?: number;
  /** With `duration`: a limit of its own for this request, on the key, instead of a configured one. */
  limit?: number;
  duration?: number;
}

/**
 * A namespace limit decided together with the key's, all-or-nothing (the gateway's): unlike the key's own limits,
 * each decision of one is a rate limit event.
 */
export interface ExtraLimit extends NamespaceCheck {
  /** The namespace as the route names it (the rate limit headers' policy name). */
  name: string;
}

export interface VerifyRequest {
  /** The request being served; analytics records the verification under it. */
  requestId: string;
  /** keys.verifyKey or the gateway, as the verification and its rate limit decisions are reported. */
  source: VerificationSource;
  workspaceId: string;
  /** The key as presented. */
  key: string;
  /** Only keys of this API are found (the gateway's route); other keys are NOT_FOUND. */
  apiId?: string;
  /** Whether the caller may verify keys of an API (keys.verifyKey's root key); when not, the key is NOT_FOUND. */
  mayVerify?: (apiId: string) => boolean;
  /** A permission query: text is parsed only once the key is known to exist (a syntax error is then a 400). */
  permissions?: string | PermissionQuery;
  credits?: { cost: number };
  ratelimits?: readonly RequestedLimit[];
  /** Limits decided in the same step; a function when they depend on the key (the gateway's per-key identifiers). */
  extraLimits?: readonly ExtraLimit[] | ((key: KeyView) => Promise<readonly ExtraLimit[]>);
  /** Recorded with the verification for analytics. */
  tags?: readonly string[];
  /** keys.verifyKey's migrationId: where to look when the key's hash finds nothing. */
  migrationId?: string;
  /**
   * The client's address, for the API's IP allowlist: keys.verifyKey's caller, or the gateway's client as the trusted
   * proxies report it (a function: worked out only for an API that has an allowlist). Unknown fails the allowlist.
   */
  clientAddress?: string | (() => string);
}

export interface LimitReport {
  /** `rl_…` of the configured limit; "" for a custom limit given in the request. */
  id: string;
  name: string;
  limit: number;
  duration: number;
  reset: number;
  remaining: number;
  exceeded: boolean;
  autoApply: boolean;
}

/** What keys.verifyKey answers (spec §2.5, reference §3): key fields only once the key is known to exist. */
export interface VerificationData extends Partial<KeyDescription> {
  valid: boolean;
  code: VerificationCode;
  /** The balance after this verification. */
  credits?: number;
  ratelimits?: LimitReport[];
}

/** Everything a verification established, for its callers: the answer, and what the gateway and analytics need. */
export interface Verification {
  data: VerificationData;
  /** The key's view when it was found (NOT_FOUND: absent). */
  key?: KeyView;
  /** Each limit checked (key, identity and extra limits), in order, with its result. */
  limits: { name: string; limit: number; durationMs: number; result: WindowResult; overrideId?: string }[];
  /** Credits taken by this verification (0 when none). */
  spentCredits: number;
  /** Set when the counters could not be reached and ratelimit.fail decided instead. */
  degraded?: "open" | "local";
  /** Unix ms of the decision. */
  decidedAt: number;
  /** USAGE_EXCEEDED on a key whose balance refills: when it does next (unix ms). */
  nextRefillAt?: number;
}

/** keys.verifyKey's body (reference §2.1). */
export interface VerifyKeyInput {
  key: string;
  tags?: string[];
  permissions?: string;
  credits?: { cost: number };
  ratelimits?: RequestedLimit[];
  /** A key its own hash does not find is looked up by this migration's scheme (and rewritten to keygate's hash). */
  migrationId?: string;
}

/** Finds keys imported under another system's hash (domain/keys/key-migrations.ts). */
export interface PendingKeySettler {
  /** True when `plaintext` was a key pending on the migration and now verifies under keygate's own hash. */
  settle(workspaceId: string, migrationId: string, plaintext: string, mayVerify?: (apiId: string) => boolean): Promise<boolean>;
}

export interface KeyViewLookup {
  /** The view of the live key with this hash in the workspace, through the cache; null when there is none. */
  find(workspaceId: string, hash: string): Promise<KeyView | null>;
}
