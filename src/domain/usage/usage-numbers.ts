import type { VerificationCode } from "../verification/codes.js";

/** Every verification outcome, in the order usage shows them. */
export const OUTCOMES: readonly VerificationCode[] = [
  "VALID",
  "RATE_LIMITED",
  "USAGE_EXCEEDED",
  "DISABLED",
  "EXPIRED",
  "FORBIDDEN",
  "INSUFFICIENT_PERMISSIONS",
  "NOT_FOUND",
];

/**
 * What was used in a period: verifications in total and by outcome (rate-limited ones are `RATE_LIMITED`), and
 * credits spent, by the balance that paid, net of the credits refunded. `credits.total` is at least
 * `key + identity`: verifications recorded before keygate noted which balance paid count in the total only.
 */
export interface UsageNumbers {
  requests: number;
  outcomes: Record<VerificationCode, number>;
  credits: { total: number; key: number; identity: number };
}

export function emptyUsage(): UsageNumbers {
  const outcomes = {} as Record<VerificationCode, number>;
  for (const outcome of OUTCOMES) outcomes[outcome] = 0;
  return { requests: 0, outcomes, credits: { total: 0, key: 0, identity: 0 } };
}

/** One grouped row of the raw table: verifications of one outcome paid by one balance, and the credits they spent. */
export interface UsageRow {
  outcome: string;
  creditsSource: string;
  requests: number;
  credits: number;
}

/** Adds a grouped row to `numbers` (an outcome keygate does not know, from a newer version, counts in the total). */
export function addRow(numbers: UsageNumbers, row: UsageRow): void {
  numbers.requests += row.requests;
  if (row.outcome in numbers.outcomes) numbers.outcomes[row.outcome as VerificationCode] += row.requests;
  numbers.credits.total += row.credits;
  if (row.creditsSource === "key") numbers.credits.key += row.credits;
  else if (row.creditsSource === "identity") numbers.credits.identity += row.credits;
}

/** Credits given back to one balance (a grouped row of the refunds table). */
export interface RefundRow {
  creditsSource: string;
  credits: number;
}

/**
 * Takes refunded credits off what `numbers` counts as spent (docs/usage.md#refunds): credits only, since the
 * refunded verification was made and still counts as a request of its outcome.
 */
export function subtractRefund(numbers: UsageNumbers, row: RefundRow): void {
  numbers.credits.total -= row.credits;
  if (row.creditsSource === "key") numbers.credits.key -= row.credits;
  else if (row.creditsSource === "identity") numbers.credits.identity -= row.credits;
}

export function addUsage(into: UsageNumbers, from: UsageNumbers): void {
  into.requests += from.requests;
  for (const outcome of OUTCOMES) into.outcomes[outcome] += from.outcomes[outcome];
  into.credits.total += from.credits.total;
  into.credits.key += from.credits.key;
  into.credits.identity += from.credits.identity;
}

export function sameUsage(a: UsageNumbers, b: UsageNumbers): boolean {
  return (
    a.requests === b.requests &&
    OUTCOMES.every((outcome) => a.outcomes[outcome] === b.outcomes[outcome]) &&
    a.credits.total === b.credits.total &&
    a.credits.key === b.credits.key &&
    a.credits.identity === b.credits.identity
  );
}

/** `to` minus `from`, field by field (a correction's change). */
export function usageDifference(to: UsageNumbers, from: UsageNumbers): UsageNumbers {
  const difference = emptyUsage();
  difference.requests = to.requests - from.requests;
  for (const outcome of OUTCOMES) difference.outcomes[outcome] = to.outcomes[outcome] - from.outcomes[outcome];
  difference.credits = {
    total: to.credits.total - from.credits.total,
    key: to.credits.key - from.credits.key,
    identity: to.credits.identity - from.credits.identity,
  };
  return difference;
}
