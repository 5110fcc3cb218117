import t from "tap";
import { periodCount, periodEnd, periodStart, periodStarts } from "../../src/domain/usage/periods.js";

const at = (iso: string) => Date.parse(iso);

t.test("usage periods are UTC hours, UTC days and calendar months", async (t) => {
  t.equal(periodStart("hourly", at("2028-02-29T13:45:10.123Z")), at("2028-02-29T13:00:00Z"));
  t.equal(periodEnd("hourly", at("2028-02-29T23:59:59.999Z")), at("2028-03-01T00:00:00Z"));
  t.equal(periodStart("daily", at("2028-02-29T23:59:59.999Z")), at("2028-02-29T00:00:00Z"), "a leap day is a day");
  t.equal(periodEnd("daily", at("2027-12-31T00:00:00Z")), at("2028-01-01T00:00:00Z"));
  t.equal(periodStart("monthly", at("2028-02-29T12:00:00Z")), at("2028-02-01T00:00:00Z"));
  t.equal(periodEnd("monthly", at("2028-01-31T12:00:00Z")), at("2028-02-01T00:00:00Z"), "January 31st's month ends on February 1st");
  t.equal(periodEnd("monthly", at("2027-12-15T00:00:00Z")), at("2028-01-01T00:00:00Z"), "December's ends with the year");
  t.same(
    periodStarts("monthly", at("2027-11-20T00:00:00Z"), at("2028-03-01T00:00:00Z")).map((ms) => new Date(ms).toISOString().slice(0, 7)),
    ["2027-11", "2027-12", "2028-01", "2028-02"],
    "every month the range touches, whole, and none starting at its end",
  );
  t.equal(periodCount("monthly", at("2027-11-20T00:00:00Z"), at("2028-03-01T00:00:00Z")), 4);
  t.equal(periodCount("monthly", at("2027-11-20T00:00:00Z"), at("2028-03-01T00:00:00.001Z")), 5);
  t.equal(periodCount("hourly", at("2028-01-01T00:30:00Z"), at("2028-01-01T02:00:00Z")), 2);
  t.equal(periodCount("daily", at("2028-01-01T00:00:00Z"), at("2028-01-01T00:00:00Z")), 0, "an empty range has none");
  t.equal(
    periodCount("daily", at("2028-01-01T00:00:00Z"), at("2028-12-31T00:00:01Z")),
    periodStarts("daily", at("2028-01-01T00:00:00Z"), at("2028-12-31T00:00:01Z")).length,
    "counted as listed: 366 days of a leap year",
  );
});
