import type { LimitDecision } from "../domain/ratelimit/limit-decision.js";

/** What the headers say of a limit decided for the request. */
type DescribedLimit = Pick<LimitDecision, "name" | "check" | "remaining" | "resetAt" | "passed">;

/**
 * Rate limit headers for a response: the IETF `RateLimit-Policy` and `RateLimit` fields (one named item per
 * applied limit) and the classic `X-RateLimit-Limit/Remaining/Reset` for the most constrained one. On a denial
 * every header describes the limit that denied, never one that passed, and `Retry-After` says when its window
 * ends. Seconds, as HTTP wants them; X-RateLimit-Reset is a unix time in seconds.
 */
export function ratelimitHeaders(limits: readonly DescribedLimit[], now: number): Record<string, string> {
  if (limits.length === 0) return {};
  const denied = limits.find((limit) => !limit.passed);
  const described = denied ? [denied] : limits;
  const secondsUntil = (at: number) => Math.max(0, Math.ceil((at - now) / 1000));
  const headers: Record<string, string> = {
    "ratelimit-policy": described
      .map((limit) => `${quote(limit.name)};q=${limit.check.limit};w=${Math.ceil(limit.check.durationMs / 1000)}`)
      .join(", "),
    ratelimit: described.map((limit) => `${quote(limit.name)};r=${limit.remaining};t=${secondsUntil(limit.resetAt)}`).join(", "),
  };
  const tightest = denied ?? described.reduce((a, b) => (b.remaining / b.check.limit < a.remaining / a.check.limit ? b : a));
  headers["x-ratelimit-limit"] = String(tightest.check.limit);
  headers["x-ratelimit-remaining"] = String(tightest.remaining);
  headers["x-ratelimit-reset"] = String(Math.ceil(tightest.resetAt / 1000));
  if (denied) headers["retry-after"] = String(Math.max(1, secondsUntil(denied.resetAt)));
  return headers;
}

/** An RFC 8941 string. */
function quote(name: string): string {
  // Most names need no escape; the replacement with a callback would cost every request.
  if (!name.includes('"') && !name.includes("\\")) return `"${name}"`;
  return `"${name.replace(/[\\"]/g, (char) => `\\${char}`)}"`;
}
