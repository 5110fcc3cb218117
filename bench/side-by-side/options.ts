import { parseArgs } from "node:util";
import { assertH2loadInstalled, assertWrkInstalled } from "./load.js";

export interface RunOptions {
  /** Seconds of load each target gets in all. */
  duration: number;
  /** Seconds per measurement; slices of all targets alternate until each has had `duration`. */
  slice: number;
  connections: number;
  /** The load generator: autocannon (in this process) or wrk (a process of its own, written in C, much cheaper). */
  generator: "autocannon" | "wrk";
}

/** --duration, --slice, --connections and --generator from the command line (defaults: 30 s, 2 s, 50, autocannon). */
export async function runOptions(): Promise<RunOptions> {
  const { values } = parseArgs({
    options: {
      duration: { type: "string", default: "30" },
      slice: { type: "string", default: "2" },
      connections: { type: "string", default: "50" },
    },
    strict: false,
  });
  const numbers = { duration: Number(values.duration), slice: Number(values.slice), connections: Number(values.connections) };
  for (const [name, value] of Object.entries(numbers)) {
    if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number, not '${String(values[name])}'`);
  }
  const generator = choiceOption("generator", ["autocannon", "wrk"]);
  if (generator === "wrk") await assertWrkInstalled();
  if (tlsOption()) await assertH2loadInstalled();
  // The serving children read these themselves; checked here too, so a bad value stops the run before any starts.
  analyticsEngineOption();
  reservationsOption();
  workersOption();
  return { ...numbers, generator };
}

/** The value of `--<name>`, one of `choices`; the first is the default. */
export function choiceOption<C extends string>(name: string, choices: readonly [C, ...C[]]): C {
  const { values } = parseArgs({ options: { [name]: { type: "string", default: choices[0] } }, strict: false });
  const value = values[name];
  if (!choices.includes(value as C)) throw new Error(`--${name} is ${choices.join(" or ")}`);
  return value as C;
}

/** --analytics embedded|off: whether the keygate under load records verifications (default: embedded, as deployed). */
export function analyticsEngineOption(): "embedded" | "off" {
  return choiceOption("analytics", ["embedded", "off"]);
}

/** --reservations on|off: ratelimit.reservations of the keygate under load (default: on, as deployed). */
/** --cluster redis://host:port,…: nodes of a Redis Cluster to measure next to the single Redis; none by default. */
export function clusterOption(): string[] {
  const { values } = parseArgs({ options: { cluster: { type: "string" } }, strict: false });
  const text = typeof values.cluster === "string" ? values.cluster : "";
  return text
    .split(",")
    .map((url) => url.trim())
    .filter((url) => url !== "");
}

export function reservationsOption(): boolean {
  return choiceOption("reservations", ["on", "off"]) === "on";
}

/** --metrics-cost on|off: gateway: also measure a keygate without metrics (metrics.enabled: false) beside it. */
export function metricsCostOption(): boolean {
  return choiceOption("metrics-cost", ["off", "on"]) === "on";
}

/** gateway: `--tls on` adds the same keygate over HTTPS, loaded over HTTP/1.1 and over HTTP/2 (h2load). */
export function tlsOption(): boolean {
  return choiceOption("tls", ["off", "on"]) === "on";
}

/** gateway: `--policies on` adds a route managed through the API with five policies, on the same keygate. */
export function policiesOption(): boolean {
  return choiceOption("policies", ["off", "on"]) === "on";
}

/** The line a benchmark prints before it starts: what it compares and how it is run. */
export function describeRun(what: string, options: RunOptions, settings: string[]): string {
  const how = `${options.generator}, ${options.connections} connections, ${options.duration} s per target in ${options.slice} s slices, interleaved`;
  return [`${what}: ${how}`, ...settings].join("; ");
}

/** --workers <n>: gateway: also run keygate as a process with n workers beside one with a single worker (0: not). */
export function workersOption(): number {
  const { values } = parseArgs({ options: { workers: { type: "string", default: "0" } }, strict: false });
  const workers = Number(values.workers);
  if (!Number.isInteger(workers) || workers < 0) throw new Error(`--workers must be a whole number, not '${String(values.workers)}'`);
  return workers;
}
