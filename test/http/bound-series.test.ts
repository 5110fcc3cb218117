import { AggregatorRegistry, Counter, Histogram, Registry } from "prom-client";
import t from "tap";
import { BoundCounter, BoundHistogram } from "../../src/http/bound-series.js";

// The bound series must read exactly as prom-client's own would after the same calls: the scrape's text, the JSON
// the primary of several workers adds up, and a reset.

const BUCKETS = [0.001, 0.01, 0.1, 1];
const OBSERVED: [number, string, string][] = [
  [0.0004, "v2", "keys.verifyKey"],
  [0.001, "v2", "keys.verifyKey"],
  [0.05, "v2", "keys.verifyKey"],
  [2.5, "gateway", "orders"],
  [0.1, "gateway", "orders"],
  [0.0099, "v2", "ratelimit.limit"],
];

function pair() {
  const ours = new Registry();
  const theirs = new Registry();
  const histogram = new BoundHistogram({
    name: "latency_seconds",
    help: "Latency.",
    labelNames: ["face", "route"],
    buckets: BUCKETS,
    registry: ours,
  });
  const counter = new BoundCounter({ name: "calls_total", help: "Calls.", labelNames: ["face", "route", "status"], registry: ours });
  const theirHistogram = new Histogram({
    name: "latency_seconds",
    help: "Latency.",
    labelNames: ["face", "route"],
    buckets: BUCKETS,
    registers: [theirs],
  });
  const theirCounter = new Counter({ name: "calls_total", help: "Calls.", labelNames: ["face", "route", "status"], registers: [theirs] });
  for (const [seconds, face, route] of OBSERVED) {
    histogram.observe(seconds, face, route);
    theirHistogram.observe({ face, route }, seconds);
    counter.inc(face, route, "200");
    theirCounter.inc({ face, route, status: "200" });
  }
  counter.inc("gateway", "orders", "503");
  theirCounter.inc({ face: "gateway", route: "orders", status: "503" });
  return { ours, theirs };
}

t.test("the scrape's text is prom-client's, sample for sample", async (t) => {
  const { ours, theirs } = pair();
  const text = await ours.metrics();
  t.equal(text, await theirs.metrics());
  t.match(text, 'latency_seconds_bucket{le="0.001",face="v2",route="keys.verifyKey"} 2', "a bound is counted in its own bucket (le)");
  t.match(text, 'latency_seconds_bucket{le="+Inf",face="gateway",route="orders"} 2', "one above every bound counts in +Inf");
  t.match(text, 'calls_total{face="gateway",route="orders",status="503"} 1');
});

t.test("the JSON adds up across workers as prom-client's does", async (t) => {
  const a = pair();
  const b = pair();
  const ours = AggregatorRegistry.aggregate([await a.ours.getMetricsAsJSON(), await b.ours.getMetricsAsJSON()]);
  const theirs = AggregatorRegistry.aggregate([await a.theirs.getMetricsAsJSON(), await b.theirs.getMetricsAsJSON()]);
  t.equal(await ours.metrics(), await theirs.metrics());
  t.match(await ours.metrics(), 'calls_total{face="v2",route="keys.verifyKey",status="200"} 6');
});

t.test("a reset forgets every child; counting starts again from zero", async (t) => {
  const registry = new Registry();
  const counter = new BoundCounter({ name: "c_total", help: "C.", labelNames: ["kind"], registry });
  counter.inc("a");
  counter.inc("a");
  registry.resetMetrics();
  t.notMatch(await registry.metrics(), "c_total{");
  counter.inc("a");
  t.match(await registry.metrics(), 'c_total{kind="a"} 1');
});

t.test("more than three labels is refused when the series is made", async (t) => {
  t.throws(
    () => new BoundCounter({ name: "wide_total", help: "W.", labelNames: ["a", "b", "c", "d"], registry: new Registry() }),
    /at most three labels/,
  );
});
