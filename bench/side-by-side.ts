/**
 * What every benchmark here shares: targets served by child processes (so the load generator never shares an
 * event loop with what it measures), autocannon or wrk driving them in short slices that take turns, and a report
 * of requests per second, p50 and p99 and CPU per target and ratios between them. See bench/README.md.
 */
import { execFile, fork, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs, promisify } from "node:util";
import autocannon from "autocannon";
import { Redis } from "ioredis";
import { buildApp } from "../src/app.js";
import { validateConfig } from "../src/config/load.js";
import { REDIS_URL } from "../test/helpers/redis.js";

// The tests' Redis URL and prefix cleanup serve the benchmarks too.
export { REDIS_URL };
export { deleteByPrefix } from "../test/helpers/redis.js";

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
    options: { duration: { type: "string", default: "30" }, slice: { type: "string", default: "2" }, connections: { type: "string", default: "50" } },
    strict: false,
  });
  const numbers = { duration: Number(values.duration), slice: Number(values.slice), connections: Number(values.connections) };
  for (const [name, value] of Object.entries(numbers)) {
    if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number, not '${String(values[name])}'`);
  }
  const generator = choiceOption("generator", ["autocannon", "wrk"]);
  if (generator === "wrk") await run("wrk", ["--version"]).catch(() => Promise.reject(new Error("--generator wrk needs wrk on the PATH (Debian: apt-get install wrk)")));
  // The serving children read these themselves; checked here too, so a bad value stops the run before any starts.
  analyticsEngineOption();
  reservationsOption();
  return { ...numbers, generator };
}

/** Runs a command to its end; resolves with what it wrote to stdout and stderr (wrk --version exits 1). */
function run(command: string, args: string[]): Promise<string> {
  return promisify(execFile)(command, args).then(
    ({ stdout, stderr }) => stdout + stderr,
    (error: { code?: unknown; stdout?: string; stderr?: string }) => (typeof error.code === "number" ? `${error.stdout ?? ""}${error.stderr ?? ""}` : Promise.reject(error)),
  );
}

/** The value of `--<name>`, one of `choices`; the first is the default. */
function choiceOption<C extends string>(name: string, choices: readonly [C, ...C[]]): C {
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
export function reservationsOption(): boolean {
  return choiceOption("reservations", ["on", "off"]) === "on";
}

export const ROOT_KEY = "root_bench_all_permissions";
export const BENCH_WORKSPACE = "ws_bench";

export interface BenchKeygate {
  url: string;
  /** The Redis prefix it writes under (deleteByPrefix removes it afterwards). */
  prefix: string;
  /** The analytics engine it records verifications in. */
  analytics: string;
  close(): Promise<void>;
}

/**
 * keygate as a benchmark runs it: Redis stores under a fresh prefix, a root key holding `*`, the given APIs and
 * other settings, analytics as --analytics says (in a temporary directory), listening on a port the OS picks.
 */
export async function startKeygate(settings: { apiId?: string } & Record<string, unknown>): Promise<BenchKeygate> {
  const { apiId, ...rest } = settings;
  const prefix = `kgbench:${randomBytes(4).toString("hex")}`;
  const dataDir = await mkdtemp(join(tmpdir(), "keygate-bench-"));
  const config = validateConfig({
    storage: { redis: { url: REDIS_URL, prefix } },
    rootKeys: [{ key: ROOT_KEY, workspaceId: BENCH_WORKSPACE, permissions: ["*"] }],
    apis: apiId === undefined ? [] : [{ id: apiId, name: "bench", workspaceId: BENCH_WORKSPACE }],
    analytics: { engine: analyticsEngineOption(), path: join(dataDir, "analytics") },
    ratelimit: { reservations: reservationsOption() },
    logging: { level: "silent" },
    ...rest,
  });
  const app = await buildApp(config, { logger: false });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return {
    url,
    prefix,
    analytics: config.analytics.engine,
    close: async () => {
      await app.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Calls a /v2 procedure of a keygate child over HTTP with the root key, as a client would; throws on anything but
 * 200. The driver creates a benchmark's keys this way rather than the child with app.inject, so that the keygate
 * under load has served real HTTP requests only, like a deployed one (bench/README.md, "How the keys are made").
 */
export async function callKeygate(url: string, procedure: string, body: object): Promise<Record<string, unknown>> {
  const response = await fetch(`${url}/v2/${procedure}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${ROOT_KEY}` },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${procedure}: ${response.status} ${text}`);
  return (JSON.parse(text) as { data: Record<string, unknown> }).data;
}

// ---- processes ------------------------------------------------------------------------------------------------

/** What a serving child reports once it listens (its URLs and whatever else the driver needs). */
export type Served = Record<string, string>;

/** The role this process was forked for (`--serve <role>`), or undefined in the driving process. */
export function servingRole(): string | undefined {
  const at = process.argv.indexOf("--serve");
  return at === -1 ? undefined : process.argv[at + 1];
}

/** Messages between the driver and a serving child. */
type ToChild = { type: "cpu" } | { type: "stop" };
type FromChild = { type: "served"; served: Served } | { type: "cpu"; micros: number };

/**
 * In a serving child: starts the servers, reports what `start` returns to the parent, answers the parent's
 * questions about the CPU time it used, and closes the servers when the parent says so.
 */
export async function serve(start: () => Promise<{ served: Served; close(): Promise<void> }>): Promise<void> {
  const { served, close } = await start();
  const send = (message: FromChild) => process.send?.(message);
  send({ type: "served", served });
  process.on("message", async (message: ToChild) => {
    if (message.type === "cpu") {
      const usage = process.cpuUsage();
      send({ type: "cpu", micros: usage.user + usage.system });
      return;
    }
    await close();
    process.exit(0);
  });
}

export interface Child {
  served: Served;
  /** CPU time (user + system) the child has used so far, in microseconds. */
  cpuMicros(): Promise<number>;
  stop(): Promise<void>;
}

/** Forks the benchmark script `moduleUrl` as a child serving `role`, and waits until it listens. */
export async function forkServing(moduleUrl: string, role: string): Promise<Child> {
  // The child gets the command line's options too (--analytics is read where keygate starts).
  const child: ChildProcess = fork(fileURLToPath(moduleUrl), ["--serve", role, ...process.argv.slice(2)], { stdio: "inherit" });
  const next = <T extends FromChild["type"]>(type: T) =>
    new Promise<Extract<FromChild, { type: T }>>((resolve, reject) => {
      const onMessage = (message: FromChild) => {
        if (message.type !== type) return;
        child.off("message", onMessage);
        child.off("exit", onExit);
        resolve(message as Extract<FromChild, { type: T }>);
      };
      const onExit = (code: number | null) => reject(new Error(`the ${role} child exited (${code})`));
      child.on("message", onMessage);
      child.once("exit", onExit);
    });
  const { served } = await next("served");
  return {
    served,
    cpuMicros: async () => {
      const answer = next("cpu");
      child.send({ type: "cpu" } satisfies ToChild);
      return (await answer).micros;
    },
    stop: async () => {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.send({ type: "stop" } satisfies ToChild);
      await exited;
    },
  };
}

/** CPU time (user + system) the Redis server has used so far, in microseconds, from INFO cpu. */
async function readRedisCpuMicros(redis: Redis): Promise<number> {
  const info = await redis.info("cpu");
  const seconds = (field: string) => Number(new RegExp(`^${field}:([0-9.]+)`, "m").exec(info)?.[1] ?? 0);
  return Math.round((seconds("used_cpu_user") + seconds("used_cpu_sys")) * 1e6);
}

// ---- load -----------------------------------------------------------------------------------------------------

/**
 * One thing to load: a URL and the request sent to it, and the child
 * that serves it, whose CPU time per request is measured alongside Redis's.
 */
export interface Target {
  label: string;
  url: string;
  servedBy: Child;
  method?: "GET" | "POST";
  headers?: Record<string, string>;
  /**
   * A fixed body, or `{ numbered }`: a body in which `{n}` becomes a number of its own for every request of the run
   * (for bodies that must differ). Numbering costs the load generator building every request, CPU that the
   * servers then lack on a small machine: use it only when needed.
   */
  body?: string | { numbered: string };
}

export interface Measurement {
  requests: number;
  seconds: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  /** CPU time the serving child and Redis used during the measurement, in microseconds. */
  serverCpuMicros: number;
  redisCpuMicros: number;
}

/** What a load generator reports of one slice. */
type Load = Omit<Measurement, "serverCpuMicros" | "redisCpuMicros">;

/** Requests numbered so far in this run, so that `{n}` never repeats across slices and targets. */
let numbered = 0;

async function measure(target: Target, duration: number, options: RunOptions, redis: Redis): Promise<Measurement> {
  const cpuBefore = await target.servedBy.cpuMicros();
  const redisBefore = await readRedisCpuMicros(redis);
  const load = options.generator === "wrk" ? await loadWithWrk(target, duration, options.connections) : await loadWithAutocannon(target, duration, options.connections);
  const serverCpuMicros = (await target.servedBy.cpuMicros()) - cpuBefore;
  return { ...load, serverCpuMicros, redisCpuMicros: (await readRedisCpuMicros(redis)) - redisBefore };
}

async function loadWithAutocannon(target: Target, duration: number, connections: number): Promise<Load> {
  const { body } = target;
  const result = await autocannon({
    url: target.url,
    connections,
    duration,
    requests: [
      {
        method: target.method ?? "GET",
        headers: target.headers ?? {},
        ...(typeof body === "string" ? { body } : {}),
        ...(typeof body === "object" ? { setupRequest: (request: autocannon.Request) => ({ ...request, body: body.numbered.replaceAll("{n}", String(numbered++)) }) } : {}),
      },
    ],
  });
  return { requests: result.requests.total, seconds: result.duration, p50: result.latency.p50, p99: result.latency.p99, non2xx: result.non2xx, errors: result.errors };
}

/** One thread of wrk with a Lua script that sends the target's request; numbered bodies continue the run's count. */
async function loadWithWrk(target: Target, duration: number, connections: number): Promise<Load> {
  const { body } = target;
  const lua = [
    `wrk.method = ${luaString(target.method ?? "GET")}`,
    ...Object.entries(target.headers ?? {}).map(([name, value]) => `wrk.headers[${luaString(name)}] = ${luaString(value)}`),
    ...(typeof body === "string" ? [`wrk.body = ${luaString(body)}`] : []),
    ...(typeof body === "object"
      ? [`local n = ${numbered}`, `local parts = { ${body.numbered.split("{n}").map(luaString).join(", ")} }`, "request = function()", "  n = n + 1", "  return wrk.format(nil, nil, nil, table.concat(parts, tostring(n)))", "end"]
      : []),
  ].join("\n");
  const script = join(await mkdtemp(join(tmpdir(), "keygate-wrk-")), "target.lua");
  try {
    await writeFile(script, lua);
    const output = await run("wrk", ["-t1", `-c${connections}`, `-d${duration}s`, "--latency", "-s", script, target.url]);
    const requests = /(\d+) requests in ([\d.]+)(us|ms|s|m)\b/.exec(output);
    if (!requests) throw new Error(`wrk did not report its requests:\n${output}`);
    // Numbers handed out in this slice: at most one per request sent, so the next slice starts beyond them.
    if (typeof body === "object") numbered += Number(requests[1]) + connections;
    const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output);
    return {
      requests: Number(requests[1]),
      seconds: milliseconds(requests[2] as string, requests[3] as string) / 1_000,
      p50: latencyMs(output, "50%"),
      p99: latencyMs(output, "99%"),
      non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(output)?.[1] ?? 0),
      errors: socketErrors ? socketErrors.slice(1).reduce((sum, count) => sum + Number(count), 0) : 0,
    };
  } finally {
    await rm(dirname(script), { recursive: true, force: true });
  }
}

function luaString(text: string): string {
  return JSON.stringify(text); // A JSON string of printable text is a valid Lua string literal.
}

function milliseconds(value: string, unit: string): number {
  return Number(value) * ({ us: 0.001, ms: 1, s: 1_000, m: 60_000 } as Record<string, number>)[unit]!;
}

/** A percentile of wrk's latency distribution, in ms rounded as autocannon reports it. */
function latencyMs(output: string, percentile: string): number {
  const line = new RegExp(`^\\s+${percentile}\\s+([\\d.]+)(us|ms|s|m)\\s*$`, "m").exec(output);
  return line ? Math.round(milliseconds(line[1] as string, line[2] as string)) : Number.NaN;
}

/** Every target's slices, in the order of the targets. */
export type Runs = Map<Target, Measurement[]>;

/**
 * Loads each target for 2 s to warm it up, then measures the targets in turn, `slice` seconds each, until each has
 * had `duration` seconds: drift on a shared machine (other work starting or stopping) then hits all of them alike.
 */
export async function interleave(targets: Target[], options: RunOptions): Promise<Runs> {
  const redis = new Redis(REDIS_URL);
  try {
    for (const target of targets) await measure(target, 2, options, redis);
    const runs: Runs = new Map(targets.map((target) => [target, []]));
    const slices = Math.max(1, Math.round(options.duration / options.slice));
    for (let i = 0; i < slices; i++) {
      for (const target of targets) runs.get(target)?.push(await measure(target, options.slice, options, redis));
      process.stdout.write(".");
    }
    process.stdout.write("\n\n");
    return runs;
  } finally {
    redis.disconnect();
  }
}

// ---- report ---------------------------------------------------------------------------------------------------

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
const total = (slices: Measurement[]): number => slices.reduce((sum, m) => sum + m.requests, 0);

/** CPU microseconds per request the server and Redis spent over all slices. */
function cpuPerRequest(slices: Measurement[]): { server: number; redis: number } {
  const requests = total(slices);
  return {
    server: slices.reduce((sum, m) => sum + m.serverCpuMicros, 0) / requests,
    redis: slices.reduce((sum, m) => sum + m.redisCpuMicros, 0) / requests,
  };
}

/** How many cores the serving process kept busy over the slices (CPU time over wall time). */
function busyCores(slices: Measurement[]): number {
  return slices.reduce((sum, m) => sum + m.serverCpuMicros, 0) / (slices.reduce((sum, m) => sum + m.seconds, 0) * 1e6);
}

/**
 * Below this, a single-threaded baseline (a bare route, a bare proxy) was not what limited its own throughput: the
 * load generator or the rest of the machine was.
 */
const SATURATED_CORES = 0.85;

/**
 * Above this, a single-threaded baseline used more CPU than its one event loop can: threads besides it (garbage
 * collection, the JIT compiler) were busy, so its CPU per request is above its usual cost.
 */
const OVERSUBSCRIBED_CORES = 1.05;

/**
 * Why ratios against a single-threaded baseline that kept `busy` cores busy must be read with care, or undefined
 * when they need no note.
 */
export function baselineNote(label: string, busy: number): string | undefined {
  if (busy < SATURATED_CORES) {
    return `the ${label} kept only ${busy.toFixed(2)} of a core busy: the load generator or the rest of the machine set its pace, not its own work, so ratios by requests against it say as much about the machine as about keygate; the ratio by CPU is the better guide to what keygate costs`;
  }
  if (busy > OVERSUBSCRIBED_CORES) {
    return `the ${label} kept ${busy.toFixed(2)} cores busy, more than its one event loop can: threads besides it (garbage collection, the JIT compiler) were busy, so it ran below its usual pace and both ratios against it flatter keygate; compare its CPU per request with other sittings before trusting them`;
  }
  return undefined;
}

/** Where a Linux guest's cpuidle haltpoll driver says how long an idle CPU polls before it halts. */
const GUEST_HALT_POLL_NS = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";

/**
 * What a sitting's report should say of the machine's idle CPUs, from the content of GUEST_HALT_POLL_NS, or
 * undefined without it (no such driver: bare metal, another hypervisor's guest, another system). On loopback each
 * answer wakes the load generator; when its CPU has halted that is a VM exit, paid more often the slower the server.
 */
export function idlePollingNote(guestHaltPollNs: string | undefined): string | undefined {
  const digits = guestHaltPollNs?.trim();
  if (digits === undefined || !/^\d+$/.test(digits)) return undefined;
  const nanoseconds = Number(digits);
  if (nanoseconds === 0) {
    return "idle CPUs halt at once (guest_halt_poll_ns 0): every answer that finds the load generator asleep pays a VM exit to wake it, which weighs more on the slower server (bench/README.md, \"The machine's idle settings\")";
  }
  return `idle CPUs poll for up to ${nanoseconds / 1_000} us before they halt (guest_halt_poll_ns ${nanoseconds})`;
}

/** Prints idlePollingNote for this machine, if there is one to print. */
export function printIdlePolling(): void {
  let content: string | undefined;
  try {
    content = readFileSync(GUEST_HALT_POLL_NS, "utf8");
  } catch {
    // No haltpoll driver here: nothing to say.
  }
  const note = idlePollingNote(content);
  if (note !== undefined) console.log(`machine: ${note}`);
}

/** Baselines whose ratios have been given that note already (it is said once per baseline). */
const noted = new Set<Target>();

/**
 * One line per target: requests per second over all its slices, the median slice's p50 and p99, the CPU time per
 * request of the serving process and of Redis, and how busy the serving process was. Then, where the system tells,
 * a line on the machine's idle CPUs.
 */
export function printTargets(runs: Runs): void {
  const width = Math.max(...[...runs.keys()].map((target) => target.label.length)) + 2;
  for (const [target, slices] of runs) {
    const seconds = slices.reduce((sum, m) => sum + m.seconds, 0);
    const failures = slices.reduce((sum, m) => sum + m.non2xx + m.errors, 0);
    const rps = (total(slices) / seconds).toFixed(0).padStart(7);
    const p50 = String(median(slices.map((m) => m.p50))).padStart(3);
    const p99 = String(median(slices.map((m) => m.p99))).padStart(3);
    const cpu = cpuPerRequest(slices);
    const cpuText = `cpu/req ${cpu.server.toFixed(1).padStart(6)} us + Redis ${cpu.redis.toFixed(1).padStart(5)} us   busy ${busyCores(slices).toFixed(2)} cores`;
    console.log(`${target.label.padEnd(width)} ${rps} req/s   p50 ${p50} ms   p99 ${p99} ms   ${cpuText}${failures > 0 ? `   (${failures} non-2xx or errors)` : ""}`);
  }
  printIdlePolling();
}

/**
 * The ratio of `target` to `baseline` (total requests in equal time), with the spread of the per-slice ratios
 * and the goal it is held against.
 */
export function printRatio(runs: Runs, target: Target, baseline: Target, goal?: number): void {
  const ours = runs.get(target) ?? [];
  const theirs = runs.get(baseline) ?? [];
  const perSlice = ours.map((m, i) => m.requests / (theirs[i] as Measurement).requests).sort((a, b) => a - b);
  const spread = `per slice ${(perSlice[0] as number).toFixed(2)}..${(perSlice.at(-1) as number).toFixed(2)}, median ${median(perSlice).toFixed(2)}`;
  const goalText = goal === undefined ? "" : `, target >= ${goal.toFixed(2)}`;
  console.log(`ratio ${target.label} / ${baseline.label}: ${(total(ours) / total(theirs)).toFixed(2)} (${spread}${goalText})`);
  const ourCpu = cpuPerRequest(ours);
  const theirCpu = cpuPerRequest(theirs);
  const cost = (theirCpu.server + theirCpu.redis) / (ourCpu.server + ourCpu.redis);
  console.log(`  by CPU per request (server + Redis): ${cost.toFixed(2)}`);
  const note = baselineNote(baseline.label, busyCores(theirs));
  if (note !== undefined && !noted.has(baseline)) {
    noted.add(baseline);
    console.log(`  note: ${note}`);
  }
}
