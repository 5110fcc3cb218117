import t from "tap";
import { ManualClock } from "../../helpers/clock.js";
import { harness, STORAGE_KINDS, WORKSPACE } from "../../helpers/harness.js";

/**
 * Accuracy against the theoretical maximum, on an injected clock (no sleeps). Requests arrive evenly at 0.9×, 1×
 * and 10× the limit for 50 windows; a perfect sliding window admits min(requests sent, 50 × limit).
 * Long windows keep Redis TTLs (real time) far away from this test's simulated time.
 */
const WINDOWS = 50;

// About a hundred thousand decisions, one after another: more than the default two minutes under coverage on a busy machine.
t.setTimeout(300_000);
const DURATION = 60_000;

for (const storage of STORAGE_KINDS) {
  t.test(`sliding-window accuracy on ${storage} stores`, async (t) => {
    const clock = new ManualClock();
    const h = await harness(t, { storage, clock });
    let serial = 0;

    /** Admitted requests over `windows` windows starting `offset` ms into a window, as a ratio of the maximum. */
    const run = async (limit: number, load: number, offset: number, windows = WINDOWS) => {
      const identifier = `caller-${++serial}`;
      const perWindow = limit * load;
      const total = Math.round(windows * perWindow);
      const start = 30_000_000 * DURATION + offset;
      let admitted = 0;
      for (let i = 0; i < total; i++) {
        clock.set(start + Math.floor((i * DURATION) / perWindow));
        const outcome = await h.app.services.ratelimit.check(
          WORKSPACE,
          [{ namespace: "accuracy", identifier, limit, durationMs: DURATION }],
          { createMissingNamespaces: true, requestId: `req_accuracy${i}` },
        );
        if (outcome.passed) admitted++;
      }
      return { admitted, maximum: Math.min(total, windows * limit) };
    };

    for (const limit of [5, 100]) {
      for (const load of [0.9, 1, 10]) {
        await t.test(
          `limit ${limit}, load ${load}x, windows aligned to the run: admitted within [0.99, 1.01] of the maximum`,
          async (t) => {
            const { admitted, maximum } = await run(limit, load, 0);
            const ratio = admitted / maximum;
            t.ok(ratio >= 0.99 && ratio <= 1.01, `admitted ${admitted} of a maximum ${maximum}: ratio ${ratio.toFixed(4)}`);
          },
        );
      }
    }

    // Limits of 1,000 and more let a Redis-backed instance admit from units reserved ahead (docs/operations.md):
    // on one instance that must cost nothing either.
    for (const load of [0.9, 1, 3]) {
      await t.test(`limit 2,000, load ${load}x, 10 windows: admitted within [0.99, 1.01] of the maximum`, async (t) => {
        const { admitted, maximum } = await run(2_000, load, 0, 10);
        const ratio = admitted / maximum;
        t.ok(ratio >= 0.99 && ratio <= 1.01, `admitted ${admitted} of a maximum ${maximum}: ratio ${ratio.toFixed(4)}`);
      });
    }

    // A run that starts mid-window spans 51 fixed windows; the first one admits a whole limit at once, which the
    // next window's estimate takes as evenly spread. That can admit up to one limit more over the run:
    // at most 1 + 1/50 of the maximum here (docs/operations.md, accuracy budget).
    for (const limit of [5, 100]) {
      for (const [load, offset] of [
        [0.9, 0.3],
        [1, 0.3],
        [10, 0.3],
        [10, 0.77],
      ] as const) {
        await t.test(`limit ${limit}, load ${load}x, starting ${offset * 100}% into a window: within [0.99, 1.02]`, async (t) => {
          const { admitted, maximum } = await run(limit, load, offset * DURATION);
          const ratio = admitted / maximum;
          t.ok(ratio >= 0.99 && ratio <= 1 + 1 / WINDOWS, `admitted ${admitted} of a maximum ${maximum}: ratio ${ratio.toFixed(4)}`);
        });
      }
    }
  });
}
