import t from "tap";
import { MAX_RESERVATION, MAX_RESERVING_CHECKS, Reservations, reservationFor } from "../../../src/storage/ratelimit/reservations.js";

const DURATION = 60_000;
const check = { bucket: "busy", limit: 10_000, durationMs: DURATION, cost: 1 };
const start = 100 * DURATION;

t.test("each check of a call may reserve 1% of a limit of at least 1,000, 64 at most, without credits", async (t) => {
  t.same(reservationFor([check], undefined), [MAX_RESERVATION]);
  t.same(reservationFor([{ ...check, limit: 1_000 }], undefined), [10]);
  t.same(reservationFor([check, { ...check, bucket: "other", limit: 2_000 }], undefined), [MAX_RESERVATION, 20], "several checks");
  t.equal(reservationFor([{ ...check, limit: 999 }], undefined), undefined);
  t.equal(reservationFor([check, { ...check, bucket: "other", limit: 999 }], undefined), undefined, "one limit too small: none");
  t.equal(reservationFor([{ ...check, cost: 0 }], undefined), undefined);
  t.equal(reservationFor([check], { keyId: "key_1", cost: 0 }), undefined);
  t.equal(reservationFor([check, { ...check }], undefined), undefined, "two checks on one counter");
  t.equal(reservationFor([], undefined), undefined);
  const many = Array.from({ length: MAX_RESERVING_CHECKS + 1 }, (_, index) => ({ ...check, bucket: `b${index}` }));
  t.equal(reservationFor(many, undefined), undefined, "too many checks");
  t.equal(reservationFor(many.slice(1), undefined)?.length, MAX_RESERVING_CHECKS);
});

t.test("one reservation of a counter is asked for at a time", async (t) => {
  const reservations = new Reservations();
  const other = { ...check, bucket: "other" };
  t.same(reservations.ask("ws_a", [check], undefined), [64]);
  t.equal(reservations.ask("ws_a", [check], undefined), undefined, "while the first is on its way");
  t.equal(reservations.ask("ws_a", [other, check], undefined), undefined, "nor with it in a call of several");
  t.same(reservations.ask("ws_b", [check], undefined), [64], "another workspace's counter");
  reservations.settled("ws_a", [check]);
  t.same(reservations.ask("ws_a", [other, check], undefined), [64, 64], "once it is settled");
  t.equal(reservations.ask("ws_a", [other], undefined), undefined, "every counter of that call is being asked");
  reservations.settled("ws_a", [other, check]);
  t.same(reservations.ask("ws_a", [other], undefined), [64]);
  t.equal(reservations.ask("ws_a", [{ ...check, limit: 999 }], undefined), undefined);
});

t.test("reserved units admit calls in their window, with what the store had left plus the units still held", async (t) => {
  const reservations = new Reservations();
  t.equal(reservations.admit("ws_a", [check], undefined, start), undefined, "nothing held");
  t.equal(reservations.observe("ws_a", check, { sequence: 100, reserved: 3 }, 9_000), 3);
  t.same(reservations.admit("ws_a", [check], undefined, start + 5), {
    passed: true,
    results: [{ passed: true, remaining: 9_002, resetAt: start + DURATION }],
    now: start + 5,
  });
  t.equal(reservations.admit("ws_a", [{ ...check, cost: 3 }], undefined, start), undefined, "more than is held");
  t.equal(reservations.admit("ws_a", [check], undefined, start + DURATION), undefined, "the next window");
  t.equal(reservations.admit("ws_a", [check], undefined, undefined), undefined, "the time is not known");
  t.equal(reservations.admit("ws_a", [check], { keyId: "key_1", cost: 1 }, start), undefined, "a call with credits");
  t.equal(reservations.observe("ws_a", check, { sequence: 100, reserved: 0 }, 8_000), 2, "a later answer updates what is left");
  t.equal(reservations.admit("ws_a", [check], undefined, start)?.results[0]?.remaining, 8_001);
  t.equal(reservations.admit("ws_a", [check], undefined, start)?.results[0]?.remaining, 8_000);
  t.equal(reservations.admit("ws_a", [check], undefined, start), undefined, "used up");
});

t.test("units are for their window only, and forget() drops them all", async (t) => {
  const reservations = new Reservations();
  reservations.observe("ws_a", check, { sequence: 100, reserved: 5 }, 9_000);
  t.equal(reservations.observe("ws_a", check, { sequence: 101, reserved: 2 }, 9_500), 2, "a new window's units replace the old");
  reservations.forget();
  t.equal(reservations.admit("ws_a", [check], undefined, start + DURATION), undefined);
});

t.test("a call of several checks is admitted only when every counter holds its cost, and takes from each", async (t) => {
  const reservations = new Reservations();
  const hourly = { bucket: "hourly", limit: 50_000, durationMs: 60 * DURATION, cost: 2 };
  reservations.observe("ws_a", check, { sequence: 100, reserved: 3 }, 9_000);
  t.equal(reservations.admit("ws_a", [check, hourly], undefined, start), undefined, "the second counter holds nothing");
  t.equal(reservations.admit("ws_a", [check], undefined, start)?.results[0]?.remaining, 9_002, "the first's units were left alone");
  reservations.observe("ws_a", hourly, { sequence: 1, reserved: 3 }, 40_000);
  t.same(reservations.admit("ws_a", [check, hourly], undefined, start), {
    passed: true,
    results: [
      { passed: true, remaining: 9_001, resetAt: start + DURATION },
      { passed: true, remaining: 40_001, resetAt: 2 * 60 * DURATION },
    ],
    now: start,
  });
  t.equal(reservations.admit("ws_a", [check, hourly], undefined, start), undefined, "the second counter has 1 unit, the call costs 2");
  t.equal(reservations.admit("ws_a", [check], undefined, start)?.results[0]?.remaining, 9_000, "and the first kept its last unit");
});
