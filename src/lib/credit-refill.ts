/**
 * Credit refills, computed lazily from the time of the last refill, so no scheduler is needed and an idle key
 * reads right. The domain (domain/credits.ts), the in-memory counter store and the Lua of
 * storage/redis/lua/credit-balance.lua use this arithmetic; keep them in step.
 */

const MS_PER_DAY = 86_400_000;

export interface RefillSchedule {
  interval: "daily" | "monthly";
  amount: number;
  /** Day of the month for monthly refills (clamped to the month's last day). */
  refillDay?: number;
}

export interface Balance {
  remaining: number;
  refill?: RefillSchedule;
  /** When the balance was last set or refilled (unix ms). */
  lastRefillAt: number;
}

/**
 * The latest scheduled refill at or before `at`: 00:00 UTC for daily refills; for monthly ones 00:00 UTC on
 * `refillDay`, or on the month's last day when the month is shorter (refillDay 31 refills on 30 April, 28 or 29
 * February).
 */
export function lastScheduledRefill(refill: RefillSchedule, at: number): number {
  if (refill.interval === "daily") return Math.floor(at / MS_PER_DAY) * MS_PER_DAY;
  const day = refill.refillDay ?? 1;
  const date = new Date(at);
  const year = date.getUTCFullYear();
  const month = date.getUTCMonth();
  const thisMonth = Date.UTC(year, month, Math.min(day, daysInMonth(year, month)));
  if (thisMonth <= at) return thisMonth;
  const previousYear = month === 0 ? year - 1 : year;
  const previousMonth = month === 0 ? 11 : month - 1;
  return Date.UTC(previousYear, previousMonth, Math.min(day, daysInMonth(previousYear, previousMonth)));
}

/** The first scheduled refill after `at`. */
export function nextScheduledRefill(refill: RefillSchedule, at: number): number {
  if (refill.interval === "daily") return Math.floor(at / MS_PER_DAY) * MS_PER_DAY + MS_PER_DAY;
  const date = new Date(lastScheduledRefill(refill, at));
  const year = date.getUTCMonth() === 11 ? date.getUTCFullYear() + 1 : date.getUTCFullYear();
  const month = (date.getUTCMonth() + 1) % 12;
  return Date.UTC(year, month, Math.min(refill.refillDay ?? 1, daysInMonth(year, month)));
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
}

/**
 * The balance with every refill due by `now` applied. A refill raises the balance to `amount` (it does not add,
 * and leaves a larger balance alone); several missed refills are one.
 */
export function withRefills<B extends Balance>(balance: B, now: number): B {
  if (!balance.refill) return balance;
  const due = lastScheduledRefill(balance.refill, now);
  if (due <= balance.lastRefillAt) return balance;
  return { ...balance, remaining: Math.max(balance.remaining, balance.refill.amount), lastRefillAt: due };
}
