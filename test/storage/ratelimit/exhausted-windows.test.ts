import t from "tap";
import { ExhaustedWindows } from "../../../src/storage/ratelimit/exhausted-windows.js";

const DURATION = 10_000;
const check = { bucket: "b", limit: 5, durationMs: DURATION, cost: 1 };
const start = 1_000 * DURATION;
const exhausted = { sequence: 1_000, reserved: 0, counts: { current: 5, previous: 0 } };

t.test("a window seen exhausted is denied within it, as the store answers a denial", async (t) => {
  const windows = new ExhaustedWindows();
  t.equal(windows.denial("ws_a", [check], start + 100), undefined, "nothing known: no denial");
  windows.observe("ws_a", check, exhausted);
  t.same(windows.denial("ws_a", [check], start + 9_999), {
    passed: false,
    results: [{ passed: false, remaining: 0, resetAt: start + DURATION }],
    now: start + 9_999,
  });
  t.equal(windows.denial("ws_b", [check], start + 100), undefined, "another workspace's counter");
  t.equal(windows.denial("ws_a", [{ ...check, limit: 6 }], start + 100), undefined, "another limit counts apart");
  t.equal(windows.denial("ws_a", [check], undefined), undefined, "the time is not known yet");
});

t.test("only what is certain is denied: not a cost-0 check, nor several checks, nor a window the counts faded in", async (t) => {
  const windows = new ExhaustedWindows();
  windows.observe("ws_a", check, { sequence: 1_000, reserved: 0, counts: { current: 5, previous: 5 } });
  t.equal(windows.denial("ws_a", [{ ...check, cost: 0 }], start + 100), undefined);
  t.equal(windows.denial("ws_a", [check, { ...check, bucket: "other" }], start + 100), undefined);
  t.equal(windows.denial("ws_a", [check], start + DURATION), undefined, "the next window: 5 carried over count as 4");
  t.equal(windows.denial("ws_a", [check], start + 2 * DURATION), undefined, "two windows on: nothing counts");
  t.equal(windows.denial("ws_a", [check], start - 1), undefined, "an earlier window: not known");
});

t.test("a limit of 0 is always denied; a window seen with room, or forget(), clears what was known", async (t) => {
  const windows = new ExhaustedWindows();
  t.equal(windows.denial("ws_a", [{ ...check, limit: 0 }], start)?.passed, false);
  windows.observe("ws_a", check, exhausted);
  windows.observe("ws_a", check, { sequence: 1_000, reserved: 0 });
  t.equal(windows.denial("ws_a", [check], start + 100), undefined, "room seen: the store decides again");
  windows.observe("ws_a", check, exhausted);
  windows.forget();
  t.equal(windows.denial("ws_a", [check], start + 100), undefined, "forgotten");
});
