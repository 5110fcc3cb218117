import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { request } from "undici";
import { buildApp } from "../../src/app.js";
import { validateConfig } from "../../src/config/load.js";
import { analyticsEngineOption, reservationsOption } from "./options.js";
import { REDIS_URL } from "./redis.js";
import { trustingTestCa } from "./tls.js";

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
 * keygate as a benchmark runs it: Redis stores (the single Redis, or the Cluster of `clusterNodes`) under a fresh prefix, a root key holding `*`, the given APIs and
 * other settings, analytics as --analytics says (in a temporary directory), listening on a port the OS picks.
 */
export async function startKeygate(
  settings: { apiId?: string; clusterNodes?: string[]; redis?: Record<string, unknown> } & Record<string, unknown>,
): Promise<BenchKeygate> {
  const { apiId, clusterNodes, redis, ...rest } = settings;
  const prefix = `kgbench:${randomBytes(4).toString("hex")}`;
  const dataDir = await mkdtemp(join(tmpdir(), "keygate-bench-"));
  const config = validateConfig({
    storage: { redis: { ...(clusterNodes ? { cluster: { nodes: clusterNodes }, prefix } : { url: REDIS_URL, prefix }), ...redis } },
    rootKeys: [{ key: ROOT_KEY, workspaceId: BENCH_WORKSPACE, permissions: ["*"] }],
    apis: apiId === undefined ? [] : [{ id: apiId, name: "bench", workspaceId: BENCH_WORKSPACE }],
    analytics: { engine: analyticsEngineOption(), path: join(dataDir, "analytics") },
    ratelimit: { reservations: reservationsOption() },
    logging: { level: "silent" },
    ...rest,
    gateway: withLoopbackUpstreams(rest.gateway),
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
 * The gateway settings given, letting routes made through the API reach the benchmarks' upstreams on loopback, as an
 * operator's `gateway.apiRoutes.allowedUpstreams` lets a sidecar's through.
 */
function withLoopbackUpstreams(gateway: unknown): Record<string, unknown> {
  return { apiRoutes: { allowedUpstreams: ["127.0.0.0/8"] }, ...(gateway as Record<string, unknown> | undefined) };
}

/**
 * Calls a /v2 procedure of a keygate child over HTTP with the root key, as a client would; throws on anything but
 * 200. The driver creates a benchmark's keys this way rather than the child with app.inject, so that the keygate
 * under load has served real HTTP requests only, like a deployed one.
 */
export async function callKeygate(url: string, procedure: string, body: object): Promise<Record<string, unknown>> {
  // A keygate over HTTPS (--tls) has the test certificate.
  const dispatcher = url.startsWith("https:") ? trustingTestCa() : undefined;
  try {
    const response = await request(`${url}/v2/${procedure}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ROOT_KEY}` },
      body: JSON.stringify(body),
      ...(dispatcher ? { dispatcher } : {}),
    });
    const text = await response.body.text();
    if (response.statusCode !== 200) throw new Error(`${procedure}: ${response.statusCode} ${text}`);
    return (JSON.parse(text) as { data: Record<string, unknown> }).data;
  } finally {
    await dispatcher?.close();
  }
}

/**
 * keygate as `npm start` runs it (build/src/server.js) with `workers` worker processes, configured as startKeygate
 * does, in a process tree of its own. Its CPU time is that of the primary and every worker, read from /proc.
 * `prefix` puts it on the Redis keys of another keygate started with the same (a fresh prefix otherwise).
 */
export async function startKeygateWorkers(
  workers: number,
  settings: { apiId?: string; prefix?: string } & Record<string, unknown>,
): Promise<BenchKeygate & { cpuMicros(): number }> {
  const { apiId, prefix = `kgbench:${randomBytes(4).toString("hex")}`, ...rest } = settings;
  const dataDir = await mkdtemp(join(tmpdir(), "keygate-bench-"));
  const config = {
    server: { host: "127.0.0.1", port: 0, workers },
    storage: { redis: { url: REDIS_URL, prefix } },
    rootKeys: [{ key: ROOT_KEY, workspaceId: BENCH_WORKSPACE, permissions: ["*"] }],
    apis: apiId === undefined ? [] : [{ id: apiId, name: "bench", workspaceId: BENCH_WORKSPACE }],
    analytics: { engine: analyticsEngineOption(), path: join(dataDir, "analytics") },
    ratelimit: { reservations: reservationsOption() },
    logging: { level: "info" },
    ...rest,
    gateway: withLoopbackUpstreams(rest.gateway),
  };
  const configPath = join(dataDir, "keygate.yaml");
  // JSON is YAML.
  await writeFile(configPath, JSON.stringify(config));
  const entry = fileURLToPath(new URL("../../src/server.js", import.meta.url));
  const child = spawn(process.execPath, [entry], {
    env: { PATH: process.env.PATH ?? "", KEYGATE_CONFIG: configPath },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const match = /keygate is listening on (https?:\/\/[^\s"]+)/.exec(out);
      if (match) resolve(match[1] as string);
    });
    child.once("exit", (code) => reject(new Error(`keygate exited (${code}) before listening:\n${out}`)));
  });
  child.stdout.resume();
  return {
    url,
    prefix,
    analytics: config.analytics.engine,
    cpuMicros: () => treeCpuMicros(child.pid as number),
    close: async () => {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** User + system CPU time of a process and its children (Linux /proc), in microseconds. */
export function treeCpuMicros(root: number): number {
  const ticksPerSecond = 100; // USER_HZ, 100 on Linux everywhere it runs here
  let ticks = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue;
    }
    // Fields after the command name (which may hold spaces) in parentheses: state is field 3, ppid 4, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const pid = Number(entry);
    if (pid === root || Number(fields[1]) === root) ticks += Number(fields[11]) + Number(fields[12]);
  }
  return (ticks / ticksPerSecond) * 1_000_000;
}
