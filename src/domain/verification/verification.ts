import type { VerificationSource } from "../observer.js";
import type { PermissionQuery } from "../permissions/query.js";
import type { LimitDecision, NamespaceLimitCheck } from "../ratelimit/limit-decision.js";
import type { KeyDenialCode } from "./codes.js";
import type { KeyView } from "./key-view.js";

// What a verification is asked and what it answers, for keys.verifyKey and the gateway alike.

export type { KeyDenialCode, VerificationCode } from "./codes.js";

export interface RequestedLimit {
  name: string;
  /** Units this request takes (default 1; 0 checks without consuming). */
  cost?: number;
  /** With `duration`: a limit of its own for this request, on the key, instead of a configured one. */
  limit?: number;
  duration?: number;
}

export interface VerifyRequest {
  /** The request being served; analytics records the verification under it. */
  requestId: string;
  /** keys.verifyKey or the gateway, as the verification and its rate limit decisions are reported. */
  source: VerificationSource;
  workspaceId: string;
  /** The key as presented. */
  key: string;
  /** Only keys of these APIs, by API id or key space id, are found (the gateway's keyauth policy); others are NOT_FOUND. */
  keyspaces?: ReadonlySet<string>;
  /** Whether the caller may verify keys of an API (keys.verifyKey's root key); when not, the key is NOT_FOUND. */
  mayVerify?: (apiId: string) => boolean;
  /** A permission query: text is parsed only once the key is known to exist (a syntax error is then a 400). */
  permissions?: string | PermissionQuery;
  credits?: { cost: number };
  ratelimits?: readonly RequestedLimit[];
  /**
   * Namespace limits decided in the same all-or-nothing step as the key's (the gateway's); a function when they
   * depend on the key (per-key identifiers). Unlike the key's own limits, each decision of one is a rate limit event.
   */
  extraLimits?: readonly NamespaceLimitCheck[] | ((key: KeyView) => Promise<readonly NamespaceLimitCheck[]>);
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

interface Decided {
  /** Each limit checked (the key's and its identity's, then the extra ones), in order. */
  limits: readonly LimitDecision[];
  /** Credits taken by this verification (0 when none). */
  spentCredits: number;
  /** Set when the counters could not be reached and ratelimit.fail decided instead. */
  degraded?: "open" | "local";
  /** Unix ms of the decision. */
  decidedAt: number;
}

/**
 * Everything a verification established: its code, the key when one was found, and what the counters decided.
 * `key` is there for every code but NOT_FOUND, so a VALID verification always has its key.
 */
export type Verification = Decided &
  (
    | {
        valid: true;
        code: "VALID";
        key: KeyView;
        /** The paying balance after this verification, when one paid. */
        credits?: number;
        /** Which balance `credits` is: the key's own or its identity's. */
        creditsSource?: "key" | "identity";
      }
    | { valid: false; code: "NOT_FOUND"; key?: undefined }
    | {
        valid: false;
        code: KeyDenialCode;
        key: KeyView;
        /** USAGE_EXCEEDED: the balance (shown once the limits passed). */
        credits?: number;
        /** Which balance `credits` is. */
        creditsSource?: "key" | "identity";
        /** USAGE_EXCEEDED on a key whose balance refills: when it does next (unix ms). */
        nextRefillAt?: number;
      }
  );

export type ValidVerification = Extract<Verification, { valid: true }>;
/** A key that exists but failed a check. */
export type KeyDenial = Extract<Verification, { code: KeyDenialCode }>;

/** keys.verifyKey's body (docs/api.md#keysverifykey). */
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
