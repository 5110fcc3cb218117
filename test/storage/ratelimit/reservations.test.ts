import t from "tap";
import { MAX_RESERVATION, Reservations, reservationFor } from "../../../src/storage/ratelimit/reservations.js";

const DURATION = 60_000;
const check = { bucket: "busy", limit: 10_000, durationMs: DURATION, cost: 1 };
const start = 100 * DURATION;

t.test("a call may reserve 1% of a limit of at least 1,000, 64 at most, alone and without credits", async (t) => {
  t.equal(reservationFor([check], undefined), MAX_RESERVATION);
  t.equal(reservationFor([{ ...check, limit: 1_000 }], undefined), 10);
  t.equal(reservationFor([{ ...check, limit: 999 }], undefined), 0);
  t.equal(reservationFor([{ ...check, cost: 0 }], undefined), 0);
  t.equal(reservationFor([check], { keyId: "key_1", cost: 0 }), 0);
  t.equal(reservationFor([check, { ...check, bucket: "other" }], undefined), 0);
});

t.test("one reservation of a counter is asked for at a time", async (t) => {
  const reservations = new Reservations();
  t.equal(reservations.ask("ws_a", [check], undefined), 64);
  t.equal(reservations.ask("ws_a", [check], undefined), 0, "while the first is on its way");
  t.equal(reservations.ask("ws_b", [check], undefined), 64, "another workspace's counter");
  reservations.settled("ws_a", check);
  t.equal(reservations.ask("ws_a", [check], undefined), 64, "once it is settled");
  t.equal(reservations.ask("ws_a", [{ ...check, limit: 999 }], undefined), 0);
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
