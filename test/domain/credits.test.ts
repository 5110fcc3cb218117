import t from "tap";
import { creditsAfterOperation, lastScheduledRefill, withRefills } from "../../src/domain/credits.js";

const at = (y: number, m: number, d: number, h = 0, min = 0) => Date.UTC(y, m - 1, d, h, min);

t.test("daily refills fall on 00:00 UTC", async (t) => {
  t.equal(lastScheduledRefill({ interval: "daily", amount: 1 }, at(2026, 3, 5, 13, 7)), at(2026, 3, 5));
  t.equal(lastScheduledRefill({ interval: "daily", amount: 1 }, at(2026, 3, 5)), at(2026, 3, 5), "exactly midnight counts");
});

t.test("monthly refills fall on refillDay, clamped to the month's last day", async (t) => {
  const monthly = (refillDay: number) => ({ interval: "monthly" as const, amount: 1, refillDay });
  t.equal(lastScheduledRefill(monthly(15), at(2026, 3, 20)), at(2026, 3, 15));
  t.equal(lastScheduledRefill(monthly(15), at(2026, 3, 10)), at(2026, 2, 15), "before the day: last month's");
  t.equal(lastScheduledRefill(monthly(31), at(2026, 2, 28, 1)), at(2026, 2, 28), "31 in a 28-day February");
  t.equal(lastScheduledRefill(monthly(29), at(2026, 2, 28, 1)), at(2026, 2, 28), "29 in a 28-day February");
  t.equal(lastScheduledRefill(monthly(30), at(2026, 2, 28, 1)), at(2026, 2, 28), "30 in a 28-day February");
  t.equal(lastScheduledRefill(monthly(29), at(2028, 2, 29, 1)), at(2028, 2, 29), "29 in a leap February");
  t.equal(lastScheduledRefill(monthly(31), at(2028, 2, 28, 23)), at(2028, 1, 31), "leap February: not yet on the 28th");
  t.equal(lastScheduledRefill(monthly(31), at(2026, 4, 30, 5)), at(2026, 4, 30), "31 in a 30-day April");
  t.equal(lastScheduledRefill(monthly(31), at(2026, 1, 15)), at(2025, 12, 31), "across the year boundary");
  t.equal(lastScheduledRefill(monthly(1), at(2026, 1, 1)), at(2026, 1, 1));
});

t.test("refills raise the balance to the amount once per scheduled moment", async (t) => {
  const credits = { remaining: 2, refill: { interval: "daily" as const, amount: 10 }, lastRefillAt: at(2026, 3, 5, 9) };
  t.same(withRefills(credits, at(2026, 3, 5, 23)), credits, "nothing due yet");
  const refilled = withRefills(credits, at(2026, 3, 8, 4));
  t.same(refilled, { ...credits, remaining: 10, lastRefillAt: at(2026, 3, 8) }, "several missed refills are one reset, not a sum");
  t.same(withRefills({ remaining: 2, lastRefillAt: 0 }, at(2030, 1, 1)), { remaining: 2, lastRefillAt: 0 }, "no refill, no change");
});

t.test("operations apply due refills first", async (t) => {
  const credits = { remaining: 0, refill: { interval: "daily" as const, amount: 10 }, lastRefillAt: at(2026, 3, 5, 9) };
  t.equal(creditsAfterOperation(credits, "decrement", 3, at(2026, 3, 6, 1))?.remaining, 7);
  t.equal(creditsAfterOperation(credits, "increment", 3, at(2026, 3, 5, 10))?.remaining, 3);
});
