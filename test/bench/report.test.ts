import t from "tap";
import type { Measurement } from "../../bench/side-by-side/load.js";
import { baselinePace, haltPollNanoseconds, median, ratio, summarise } from "../../bench/side-by-side/report.js";

/** A slice of `requests` in 2 s, with whatever else the test sets. */
function slice(requests: number, options: Partial<Measurement> = {}): Measurement {
  return { requests, seconds: 2, p50: 1, p99: 5, non2xx: 0, errors: 0, serverCpuMicros: 0, redisCpuMicros: 0, ...options };
}

t.test("a target's summary: requests per second over all slices, the median slice's latency, CPU per request, busy cores", async (t) => {
  const slices = [
    slice(10_000, { p50: 1, p99: 9, serverCpuMicros: 1_000_000, redisCpuMicros: 200_000, non2xx: 3 }),
    slice(20_000, { p50: 3, p99: 4, serverCpuMicros: 1_600_000, redisCpuMicros: 400_000, errors: 2 }),
    slice(30_000, { p50: 2, p99: 7, serverCpuMicros: 2_000_000, redisCpuMicros: 600_000 }),
  ];
  t.same(summarise(slices), {
    requestsPerSecond: 10_000, // 60,000 requests in 6 s
    p50: 2,
    p99: 7,
    cpuPerRequest: { server: 4_600_000 / 60_000, redis: 1_200_000 / 60_000 },
    busyCores: 4_600_000 / 6_000_000,
    failures: 5,
  });
});

t.test(
  "a ratio: total requests against the baseline's, the spread of slice against slice, and the baseline's CPU per request over the target's",
  async (t) => {
    const baseline = [
      slice(1_000, { serverCpuMicros: 20_000 }),
      slice(2_000, { serverCpuMicros: 40_000 }),
      slice(1_000, { serverCpuMicros: 20_000 }),
    ];
    const target = [
      slice(800, { serverCpuMicros: 20_000, redisCpuMicros: 4_000 }),
      slice(1_000, { serverCpuMicros: 25_000, redisCpuMicros: 5_000 }),
      slice(900, { serverCpuMicros: 22_500, redisCpuMicros: 4_500 }),
    ];
    const result = ratio(target, baseline);
    t.equal(result.byRequests, 2_700 / 4_000);
    t.same(result.perSlice, { lowest: 0.5, highest: 0.9, median: 0.8 });
    // The baseline spends 20 us per request; the target 25 us in the server and 5 us in Redis.
    t.equal(result.byCpu.toFixed(6), (20 / 30).toFixed(6));
  },
);

t.test("the median of an even count is the upper middle value", async (t) => {
  t.equal(median([4, 1, 3, 2]), 3);
  t.equal(median([5]), 5);
});

t.test(
  "a baseline's pace: about one busy core is its own; well under, something else set it; over one, other threads helped",
  async (t) => {
    t.equal(baselinePace(0.84), "held back");
    for (const busy of [0.85, 1.0, 1.05]) t.equal(baselinePace(busy), "paced", `${busy} cores`);
    t.equal(baselinePace(1.06), "helped");
  },
);

t.test("the machine's idle polling is read as nanoseconds, and anything that is not a count says nothing", async (t) => {
  t.equal(haltPollNanoseconds("0\n"), 0);
  t.equal(haltPollNanoseconds("200000\n"), 200_000);
  for (const content of [undefined, "", "fast\n", "-5", "1.5"]) t.equal(haltPollNanoseconds(content), undefined, JSON.stringify(content));
});
