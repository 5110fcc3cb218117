import { invalidAt } from "../errors/keygate-error.js";
import { withRefills } from "../lib/credit-refill.js";
import { defined } from "../lib/defined.js";
import type { CreditRecord, CreditRefill } from "../storage/records.js";

export { lastScheduledRefill, withRefills } from "../lib/credit-refill.js";

/** Credits as the API shows them: `remaining: null` means unlimited. */
export interface CreditsView {
  remaining: number | null;
  refill?: CreditRefill;
  /** keygate's extension: the low threshold set on the balance. */
  lowThreshold?: number;
}

export interface CreditsInput {
  remaining?: number | null;
  refill?: { interval: "daily" | "monthly"; amount: number; refillDay?: number } | null;
  /** keygate's extension: a balance taken to at or below it posts a `*.credits.low` notice (null drops it). */
  lowThreshold?: number | null;
}

/** Whose balance a credit change is about, as its refusals name it. */
export type CreditsHolder = "key" | "identity";

export function viewCredits(credits: CreditRecord | null, now: number): CreditsView | undefined {
  if (!credits) return undefined;
  const current = withRefills(credits, now);
  return { remaining: current.remaining, ...defined({ refill: current.refill, lowThreshold: current.lowThreshold }) };
}

/** Validates a refill given at `location`: monthly needs refillDay; daily with refillDay is dropped or refused. */
function checkRefill(refill: NonNullable<CreditsInput["refill"]>, location: string, dailyRefillDay: "ignore" | "refuse"): CreditRefill {
  if (refill.interval === "monthly") {
    if (refill.refillDay === undefined)
      throw invalidAt(`${location}.refillDay`, "is required when the interval is 'monthly'", "give the day of the month (1-31)");
    return { interval: "monthly", amount: refill.amount, refillDay: refill.refillDay };
  }
  if (refill.refillDay !== undefined && dailyRefillDay === "refuse") {
    throw invalidAt(
      `${location}.refillDay`,
      "must not be given when the interval is 'daily'",
      "remove refillDay or use the 'monthly' interval",
    );
  }
  return { interval: "daily", amount: refill.amount };
}

/**
 * The balance a new key (or identity) starts with (null: unlimited). As in Unkey, a daily refill's refillDay is
 * ignored here.
 */
export function creditsForNewKey(input: CreditsInput | undefined, now: number): CreditRecord | null {
  if (!input) return null;
  if (input.remaining === undefined || input.remaining === null) {
    if (input.refill) throw invalidAt("body.credits.remaining", "must be provided when credits.refill is set", "give the starting balance");
    if (input.lowThreshold !== undefined && input.lowThreshold !== null) throw thresholdWithoutBalance();
    return null;
  }
  return {
    remaining: input.remaining,
    ...defined({ refill: input.refill ? checkRefill(input.refill, "body.credits.refill", "ignore") : undefined }),
    lastRefillAt: now,
    ...defined({ lowThreshold: input.lowThreshold ?? undefined }),
  };
}

function thresholdWithoutBalance() {
  return invalidAt("body.credits.lowThreshold", "needs a balance: unlimited credits never run low", "give credits.remaining too");
}

/**
 * updateKey's credits, three-state: null makes the key unlimited; `remaining: null` too (and drops the refill);
 * `refill: null` drops only the refill; omitted fields stay as they are.
 */
export function creditsAfterUpdate(
  current: CreditRecord | null,
  input: CreditsInput | null,
  now: number,
  holder: CreditsHolder = "key",
): CreditRecord | null {
  if (input === null || input.remaining === null) return null;
  const base = current ? withRefills(current, now) : null;
  const remaining = input.remaining ?? base?.remaining;
  let refill = base?.refill;
  if (input.refill === null) refill = undefined;
  else if (input.refill !== undefined) refill = checkRefill(input.refill, "body.credits.refill", "refuse");
  const lowThreshold = input.lowThreshold === null ? undefined : (input.lowThreshold ?? base?.lowThreshold);
  if (remaining === undefined) {
    if (refill)
      throw invalidAt(
        "body.credits.remaining",
        `must be provided when credits.refill is set on ${holder === "key" ? "a key" : "an identity"} with unlimited credits`,
        "give the starting balance",
      );
    if (lowThreshold !== undefined) throw thresholdWithoutBalance();
    return null;
  }
  return {
    remaining,
    ...defined({ refill }),
    lastRefillAt: base && input.remaining === undefined ? base.lastRefillAt : now,
    ...defined({ lowThreshold }),
  };
}

/** updateCredits: set (null: unlimited, which also drops the refill), increment, or decrement (floored at 0). */
export function creditsAfterOperation(
  current: CreditRecord | null,
  operation: "set" | "increment" | "decrement",
  value: number | null | undefined,
  now: number,
  holder: CreditsHolder = "key",
): CreditRecord | null {
  if (operation === "set") {
    if (value === null || value === undefined) return null;
    const base = current ? withRefills(current, now) : null;
    return {
      remaining: value,
      ...defined({ refill: base?.refill }),
      lastRefillAt: base?.lastRefillAt ?? now,
      ...defined({ lowThreshold: base?.lowThreshold }),
    };
  }
  if (value === null || value === undefined) {
    throw invalidAt("body.value", "must be provided for the increment and decrement operations", "give the amount to add or subtract");
  }
  if (!current)
    throw invalidAt(
      "body.operation",
      `cannot increment or decrement ${holder === "key" ? "a key" : "an identity"} with unlimited credits`,
      `use 'set' to give the ${holder} a balance first`,
    );
  const base = withRefills(current, now);
  const remaining = operation === "increment" ? base.remaining + value : Math.max(0, base.remaining - value);
  return { ...base, remaining };
}
