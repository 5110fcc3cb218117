/**
 * The report of a side-by-side run: per target, requests per second, latency, CPU per request of the serving
 * child and of Redis, and how busy the child was; then ratios between targets, by requests and by CPU per
 * request. The arithmetic is in functions of its own (tested in test/bench); the print functions only format.
 */
import { readFileSync } from "node:fs";
import type { Measurement, Runs, Target } from "./load.js";

/** The middle value (the upper one of an even count). */
export function median(values: readonly number[]): number {
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
}

export interface TargetSummary {
  requestsPerSecond: number;
  /** The median slice's latency percentiles, in ms. */
  p50: number;
  p99: number;
  /** CPU microseconds per request the serving child and Redis spent over all slices. */
  cpuPerRequest: { server: number; redis: number };
  /** How many cores the serving child kept busy over the slices (its CPU time over wall time). */
  busyCores: number;
  /** Answers other than 2xx, and socket errors. */
  failures: number;
}

export function summarise(slices: readonly Measurement[]): TargetSummary {
  const sum = (field: (m: Measurement) => number) => slices.reduce((total, m) => total + field(m), 0);
  const requests = sum((m) => m.requests);
  const seconds = sum((m) => m.seconds);
  return {
    requestsPerSecond: requests / seconds,
    p50: median(slices.map((m) => m.p50)),
    p99: median(slices.map((m) => m.p99)),
    cpuPerRequest: { server: sum((m) => m.serverCpuMicros) / requests, redis: sum((m) => m.redisCpuMicros) / requests },
    busyCores: sum((m) => m.serverCpuMicros) / (seconds * 1e6),
    failures: sum((m) => m.non2xx + m.errors),
  };
}

export interface Ratio {
  /** Total requests of the target over the baseline's, in equal time. */
  byRequests: number;
  /** The same ratio slice by slice (the target's slice i against the baseline's slice i). */
  perSlice: { lowest: number; highest: number; median: number };
  /** The baseline's CPU per request (server + Redis) over the target's: the share of the baseline's speed the target's cost allows. */
  byCpu: number;
}

export function ratio(target: readonly Measurement[], baseline: readonly Measurement[]): Ratio {
  const total = (slices: readonly Measurement[]) => slices.reduce((sum, m) => sum + m.requests, 0);
  const perSlice = target.map((m, i) => m.requests / (baseline[i] as Measurement).requests).sort((a, b) => a - b);
  const cost = (slices: readonly Measurement[]) => {
    const { server, redis } = summarise(slices).cpuPerRequest;
    return server + redis;
  };
  return {
    byRequests: total(target) / total(baseline),
    perSlice: { lowest: perSlice[0] as number, highest: perSlice.at(-1) as number, median: median(perSlice) },
    byCpu: cost(baseline) / cost(target),
  };
}

/**
 * How a single-threaded baseline's own work set its pace, from the cores it kept busy: `paced` about one core;
 * `held back` well under one (the load generator or the rest of the machine set the pace, so ratios by requests
 * against it flatter keygate and the ratio by CPU is the better guide); `helped` over one (garbage collection or
 * the JIT compiler ran beside its event loop, so it ran below its usual pace and both ratios flatter keygate).
 */
export function baselinePace(busyCores: number): "paced" | "held back" | "helped" {
  if (busyCores < 0.85) return "held back";
  if (busyCores > 1.05) return "helped";
  return "paced";
}

/** Where a Linux guest's cpuidle haltpoll driver says how long an idle CPU polls before it halts. */
const GUEST_HALT_POLL_NS = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";

/**
 * The nanoseconds an idle CPU polls before it halts, from the content of GUEST_HALT_POLL_NS; undefined without it
 * (no such driver: bare metal, another hypervisor's guest, another system) or when it is not a count.
 */
export function haltPollNanoseconds(content: string | undefined): number | undefined {
  const digits = content?.trim();
  return digits !== undefined && /^\d+$/.test(digits) ? Number(digits) : undefined;
}

/**
 * One line per target (see TargetSummary), then, where the system tells, a line on the machine's idle CPUs: on
 * loopback each answer wakes the load generator, and when its CPU has halted that is a VM exit, paid more often
 * the slower the server.
 */
export function printTargets(runs: Runs): void {
  const width = Math.max(...[...runs.keys()].map((target) => target.label.length)) + 2;
  for (const [target, slices] of runs) {
    const s = summarise(slices);
    const cpu = `cpu/req ${s.cpuPerRequest.server.toFixed(1).padStart(6)} us + Redis ${s.cpuPerRequest.redis.toFixed(1).padStart(5)} us   busy ${s.busyCores.toFixed(2)} cores`;
    const failures = s.failures > 0 ? `   (${s.failures} non-2xx or errors)` : "";
    console.log(
      `${target.label.padEnd(width)} ${s.requestsPerSecond.toFixed(0).padStart(7)} req/s   p50 ${String(s.p50).padStart(3)} ms   p99 ${String(s.p99).padStart(3)} ms   ${cpu}${failures}`,
    );
  }
  let content: string | undefined;
  try {
    content = readFileSync(GUEST_HALT_POLL_NS, "utf8");
  } catch {
    // No haltpoll driver here: nothing to say.
  }
  const polling = haltPollNanoseconds(content);
  if (polling === 0)
    console.log(
      "machine: idle CPUs halt at once (guest_halt_poll_ns 0): an answer that finds the load generator asleep pays a VM exit to wake it",
    );
  else if (polling !== undefined)
    console.log(`machine: idle CPUs poll for up to ${polling / 1_000} us before they halt (guest_halt_poll_ns ${polling})`);
}

/** Baselines whose pace has been noted already (it is said once per baseline). */
const noted = new Set<Target>();

/** The ratio of `target` to `baseline` by requests (with the spread of the slices and the goal), then by CPU per request. */
export function printRatio(runs: Runs, target: Target, baseline: Target, goal?: number): void {
  const theirs = runs.get(baseline) ?? [];
  const r = ratio(runs.get(target) ?? [], theirs);
  const goalText = goal === undefined ? "" : `, goal >= ${goal.toFixed(2)}`;
  console.log(
    `ratio ${target.label} / ${baseline.label}: ${r.byRequests.toFixed(2)} (per slice ${r.perSlice.lowest.toFixed(2)}..${r.perSlice.highest.toFixed(2)}, median ${r.perSlice.median.toFixed(2)}${goalText})`,
  );
  console.log(`  by CPU per request (server + Redis): ${r.byCpu.toFixed(2)}`);
  if (noted.has(baseline)) return;
  const busy = summarise(theirs).busyCores.toFixed(2);
  const pace = baselinePace(summarise(theirs).busyCores);
  if (pace === "held back")
    console.log(`  note: the ${baseline.label} kept only ${busy} of a core busy: something else set its pace; read the ratio by CPU`);
  if (pace === "helped")
    console.log(`  note: the ${baseline.label} kept ${busy} cores busy, more than its one event loop can: both ratios flatter keygate`);
  if (pace !== "paced") noted.add(baseline);
}
