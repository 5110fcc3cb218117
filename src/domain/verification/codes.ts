/**
 * What a verification answers (docs/decisions.md#verification-codes). Every code but VALID is a denial; analytics records
 * each as the verification's outcome, and metrics count them by it. FORBIDDEN: the client's address is outside the
 * API's IP allowlist.
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

/** The codes of a key that exists but failed a check. */
export type KeyDenialCode = Exclude<VerificationCode, "VALID" | "NOT_FOUND">;
