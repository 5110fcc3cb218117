/**
 * Load on the targets: autocannon (in this process) or wrk (a process of its own) drives one target at a time, in
 * short slices that take turns, and each slice records what the load generator saw and the CPU time the serving
 * child and Redis spent meanwhile.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import autocannon from "autocannon";
import { Redis } from "ioredis";
import { type Load, parseH2loadOutput, parseWrkOutput, type RequestShape, sliceCount, wrkScript } from "./generator-io.js";
import type { RunOptions } from "./options.js";
import type { Child } from "./processes.js";
import { REDIS_URL, redisCpuMicros } from "./redis.js";

/** One thing to load: a URL and the request sent to it, and the child that serves it. */
export interface Target extends RequestShape {
  label: string;
  url: string;
  servedBy: Child;
  /**
   * Loaded by h2load over HTTP/2 (a GET without a body), whatever --generator says, with `streams` requests in flight
   * on each connection: the run's concurrency (--connections) over that many times fewer connections.
   */
  http2?: { streams: number };
}

export interface Measurement extends Load {
  /** CPU time the serving child and Redis used during the slice, in microseconds. */
  serverCpuMicros: number;
  redisCpuMicros: number;
}

/** Every target's slices, in the order of the targets. */
export type Runs = Map<Target, Measurement[]>;

/**
 * Loads each target for 2 s to warm it up, then measures the targets in turn, `slice` seconds each, until each has
 * had `duration` seconds: drift on a shared machine (other work starting or stopping) then hits all of them alike.
 */
export async function interleave(targets: Target[], options: RunOptions, redisUrl = REDIS_URL): Promise<Runs> {
  const redis = new Redis(redisUrl);
  try {
    for (const target of targets) await measure(target, 2, options, redis);
    const runs: Runs = new Map(targets.map((target) => [target, []]));
    for (let i = 0; i < sliceCount(options.duration, options.slice); i++) {
      for (const target of targets) runs.get(target)?.push(await measure(target, options.slice, options, redis));
      process.stdout.write(".");
    }
    process.stdout.write("\n\n");
    return runs;
  } finally {
    redis.disconnect();
  }
}

/** Requests numbered so far in this run, so that `{n}` never repeats across slices and targets. */
let numbered = 0;

async function measure(target: Target, duration: number, options: RunOptions, redis: Redis): Promise<Measurement> {
  const cpuBefore = await target.servedBy.cpuMicros();
  const redisBefore = await redisCpuMicros(redis);
  const load = target.http2
    ? await loadWithH2load(target, duration, options.connections, target.http2.streams)
    : options.generator === "wrk"
      ? await loadWithWrk(target, duration, options.connections)
      : await loadWithAutocannon(target, duration, options.connections);
  const serverCpuMicros = (await target.servedBy.cpuMicros()) - cpuBefore;
  return { ...load, serverCpuMicros, redisCpuMicros: (await redisCpuMicros(redis)) - redisBefore };
}

async function loadWithAutocannon(target: Target, duration: number, connections: number): Promise<Load> {
  const { body } = target;
  const request: autocannon.Request = { method: target.method ?? "GET", headers: target.headers ?? {} };
  if (typeof body === "string") request.body = body;
  if (typeof body === "object" && "numbered" in body)
    request.setupRequest = (next: autocannon.Request) => ({ ...next, body: body.numbered.replaceAll("{n}", String(numbered++)) });
  if (typeof body === "object" && "drawn" in body)
    request.setupRequest = (next: autocannon.Request) => ({
      ...next,
      body: body.drawn.replaceAll("{n}", String(Math.floor(Math.random() * body.from))),
    });
  const result = await autocannon({ url: target.url, connections, duration, requests: [request] });
  return {
    requests: result.requests.total,
    seconds: result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

/** Runs a command to its end; resolves with what it wrote to stdout and stderr, whatever its exit code (wrk --version exits 1). */
function run(command: string, args: string[]): Promise<string> {
  return promisify(execFile)(command, args).then(
    ({ stdout, stderr }) => stdout + stderr,
    (error: { code?: unknown; stdout?: string; stderr?: string }) =>
      typeof error.code === "number" ? `${error.stdout ?? ""}${error.stderr ?? ""}` : Promise.reject(error),
  );
}

/** Rejects, saying how to install it, when wrk is not on the PATH. */
export async function assertWrkInstalled(): Promise<void> {
  await run("wrk", ["--version"]).catch(() =>
    Promise.reject(new Error("--generator wrk needs wrk on the PATH (Debian: apt-get install wrk)")),
  );
}

/** Rejects, saying how to install it, when h2load is not on the PATH. */
export async function assertH2loadInstalled(): Promise<void> {
  await run("h2load", ["--version"]).catch(() =>
    Promise.reject(new Error("--tls on needs h2load on the PATH (Debian: apt-get install nghttp2-client)")),
  );
}

/**
 * One thread of h2load over HTTP/2: `concurrency` requests in flight (the HTTP/1.1 targets' connections), `streams`
 * on each connection; latencies from its per-request log, which has no percentiles of its own.
 */
async function loadWithH2load(target: Target, duration: number, concurrency: number, streams: number): Promise<Load> {
  const connections = Math.max(1, Math.round(concurrency / streams));
  if (target.body !== undefined || (target.method ?? "GET") !== "GET") throw new Error("h2load targets are GETs without a body");
  const directory = await mkdtemp(join(tmpdir(), "keygate-h2load-"));
  try {
    const log = join(directory, "requests.tsv");
    const headers = Object.entries(target.headers ?? {}).flatMap(([name, value]) => ["-H", `${name}: ${value}`]);
    const output = await run("h2load", [
      "-t1",
      `-c${connections}`,
      `-m${streams}`,
      `-D${duration}`,
      "--log-file",
      log,
      ...headers,
      target.url,
    ]);
    return parseH2loadOutput(output, await readFile(log, "utf8"));
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}

/** One thread of wrk with a Lua script that sends the target's request; numbered bodies continue the run's count. */
async function loadWithWrk(target: Target, duration: number, connections: number): Promise<Load> {
  const script = join(await mkdtemp(join(tmpdir(), "keygate-wrk-")), "target.lua");
  try {
    await writeFile(script, wrkScript(target, numbered));
    const load = parseWrkOutput(await run("wrk", ["-t1", `-c${connections}`, `-d${duration}s`, "--latency", "-s", script, target.url]));
    // Numbers handed out in this slice: at most one per request sent, so the next slice starts beyond them.
    if (typeof target.body === "object" && "numbered" in target.body) numbered += load.requests + connections;
    return load;
  } finally {
    await rm(dirname(script), { recursive: true, force: true });
  }
}
