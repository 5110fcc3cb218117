import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { REDIS_URL, uniquePrefix } from "./redis.js";

/** The compiled entry points under build/ (npm test compiles before it runs tap). */
export const SERVER_ENTRY = fileURLToPath(new URL("../../src/server.js", import.meta.url));
export const CLI_ENTRY = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
/** How long a test's server has to exit on SIGTERM at the end of its test before it is killed. */
const TEARDOWN_GRACE_MS = 5_000;

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface RunningServer {
  child: ChildProcess;
  baseUrl: string;
  /** The working directory the server runs in: a fresh temporary one (its `data/` is the server's). */
  cwd: string;
  stdout: () => string;
  stderr: () => string;
  /** stdout as the JSON log lines it consists of (throws on a line that is not JSON). */
  logLines: () => Record<string, unknown>[];
  stop(): Promise<number | null>;
}

/** A fresh directory for a server's embedded analytics engine, removed on teardown (never the repository's data/). */
export function analyticsDirectory(t: Teardown): string {
  const path = mkdtempSync(join(tmpdir(), "keygate-analytics-"));
  t.teardown(() => rmSync(path, { recursive: true, force: true }));
  return path;
}

/** A fresh working directory for a server, removed on teardown. */
export function workingDirectory(t: Teardown): string {
  const path = mkdtempSync(join(tmpdir(), "keygate-cwd-"));
  t.teardown(() => rmSync(path, { recursive: true, force: true }));
  return path;
}

/**
 * Starts `node server.js` with `env` and waits for its start-up line; killed on teardown. It runs in `cwd` (a fresh
 * temporary directory unless given), on `node` (this one unless given), and its embedded analytics engine gets a
 * temporary directory unless `env` names one. stdout and stderr are pipes, not terminals.
 */
export async function startServer(
  t: Teardown,
  env: Record<string, string>,
  timeoutMs = 15_000,
  cwd = workingDirectory(t),
  node = process.execPath,
): Promise<RunningServer> {
  const child = spawn(node, [SERVER_ENTRY], {
    cwd,
    env: {
      PATH: process.env.PATH ?? "",
      PORT: "0",
      HOST: "127.0.0.1",
      KEYGATE_ANALYTICS_PATH: env.KEYGATE_ANALYTICS_PATH ?? analyticsDirectory(t),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  // Ended as an operator ends it, so that it writes what it ran (the suite's coverage counts children too); killed
  // when it has not exited within a few seconds.
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    const killer = setTimeout(() => child.kill("SIGKILL"), TEARDOWN_GRACE_MS);
    await exited;
    clearTimeout(killer);
  });
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in ${timeoutMs} ms:\n${out}\n${err}`)), timeoutMs);
    const check = () => {
      const match = /keygate is listening on (https?:\/\/[^\s"]+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve(match[1] as string);
      }
    };
    child.stdout.on("data", check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${out}\n${err}`));
    });
  });
  return {
    child,
    baseUrl,
    cwd,
    stdout: () => out,
    stderr: () => err,
    logLines: () =>
      out
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => JSON.parse(line) as Record<string, unknown>),
    stop: async () => {
      child.kill("SIGTERM");
      return exited;
    },
  };
}

/** Runs a command to completion and returns its exit code and output. */
export function run(
  entry: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [entry, ...args], {
      env: { PATH: process.env.PATH ?? "", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

/** POST /v2/<procedure> over real HTTP. */
export async function post(baseUrl: string, procedure: string, rootKey: string, body: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(`${baseUrl}/v2/${procedure}`, {
    method: "POST",
    headers: { authorization: `Bearer ${rootKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

/** Root key held (with `*`, in workspace ws_cluster) by every instance started by startInstances. */
export const CLUSTER_ROOT_KEY = "root_cluster_test_all";

export interface InstanceOptions {
  /** The Redis form in YAML flow style (`cluster: { nodes: [...] }`); the test's Redis URL by default. */
  redis?: string;
  /** The root key's workspace (ws_cluster by default). */
  workspaceId?: string;
  /** How long each may take to start (startServer's 15 s by default; a loaded machine may need more). */
  startTimeoutMs?: number;
}

/**
 * `count` keygate processes on one Redis and one key prefix (unique to the test, cleaned up), with
 * CLUSTER_ROOT_KEY and any `extraYaml` configuration appended to the file they share.
 */
export async function startInstances(t: Teardown, count: number, extraYaml = "", options: InstanceOptions = {}): Promise<RunningServer[]> {
  const prefix = uniquePrefix(t, "cluster");
  const path = join(mkdtempSync(join(tmpdir(), "keygate-cluster-")), "keygate.yaml");
  const redis = options.redis ?? `url: "${REDIS_URL}"`;
  const workspaceId = options.workspaceId ?? "ws_cluster";
  writeFileSync(
    path,
    `storage:\n  redis: { ${redis}, prefix: "${prefix}" }\nrootKeys:\n  - { key: "${CLUSTER_ROOT_KEY}", workspaceId: ${workspaceId}, permissions: ["*"] }\nlogging:\n  level: warn\n${extraYaml}`,
  );
  return Promise.all(Array.from({ length: count }, () => startServer(t, { KEYGATE_CONFIG: path }, options.startTimeoutMs)));
}

/** Two instances as startInstances makes them. */
export async function startPair(t: Teardown, extraYaml = "", options: InstanceOptions = {}): Promise<[RunningServer, RunningServer]> {
  const [a, b] = await startInstances(t, 2, extraYaml, options);
  if (!a || !b) throw new Error("two instances were asked for");
  return [a, b];
}

/** The root key and API of a process started by startGatewayProcess. */
export const GATEWAY_ROOT_KEY = "root_gateway_process_test";
export const GATEWAY_API = "api_gateway_process";

export interface GatewayProcess {
  server: RunningServer;
  /** The configuration file the process reads. */
  path: string;
  /** A key of GATEWAY_API. */
  key: string;
  /** A GET through the gateway with a key of GATEWAY_API. */
  get(path: string): Promise<Response>;
  /** Rewrites the configuration file with /svc routed to `upstream` (the other settings as at the start). */
  routeTo(upstream: string): void;
}

/**
 * keygate as a process (Redis stores under a prefix of the test's own, analytics off, logging at warn) with one
 * route, /svc to `upstream`, in a configuration file of its own; `watchConfig` as given. Holds one key of
 * GATEWAY_API.
 */
export async function startGatewayProcess(t: Teardown, options: { upstream: string; watchConfig: boolean }): Promise<GatewayProcess> {
  const prefix = uniquePrefix(t, "gateway");
  const directory = mkdtempSync(join(tmpdir(), "keygate-gateway-"));
  t.teardown(() => rmSync(directory, { recursive: true, force: true }));
  const path = join(directory, "keygate.yaml");
  const routeTo = (upstream: string) =>
    writeFileSync(
      path,
      `storage:\n  redis: { url: "${REDIS_URL}", prefix: "${prefix}" }\nrootKeys:\n  - { key: "${GATEWAY_ROOT_KEY}", workspaceId: ws_gateway, permissions: ["*"] }\n` +
        `apis:\n  - { id: ${GATEWAY_API}, name: gateway-process, workspaceId: ws_gateway }\nlogging:\n  level: warn\nanalytics:\n  engine: off\n` +
        `gateway: { watchConfig: ${options.watchConfig} }\nroutes:\n  - { name: svc, match: { prefix: /svc }, upstream: "${upstream}", apiId: ${GATEWAY_API} }\n`,
    );
  routeTo(options.upstream);
  const server = await startServer(t, { KEYGATE_CONFIG: path });
  const key = (await post(server.baseUrl, "keys.createKey", GATEWAY_ROOT_KEY, { apiId: GATEWAY_API })).body.data.key as string;
  return { server, path, key, get: (at) => fetch(`${server.baseUrl}${at}`, { headers: { authorization: `Bearer ${key}` } }), routeTo };
}

/** Load kept up until stopped: the statuses answered and the longest request, for a test to report. */
export interface SteadyLoad {
  statuses: Map<number, number>;
  /** The first answer of each status other than 200, for the failure message: what went wrong, in keygate's words. */
  firstRefusals: Map<number, unknown>;
  /** How many requests have been answered so far. */
  answered(): number;
  /** Ends the load once the requests in flight are answered; resolves with the longest request in ms. */
  stop(): Promise<number>;
}

/** `ratelimit.limit` with `body` in a loop, two requests at a time on each instance, until stop() (0: no answer). */
export function steadyRatelimitLoad(instances: readonly RunningServer[], body: Record<string, unknown>): SteadyLoad {
  const statuses = new Map<number, number>();
  const firstRefusals = new Map<number, unknown>();
  let longestMs = 0;
  let running = true;
  const worker = async (instance: RunningServer) => {
    while (running) {
      const started = performance.now();
      const result = await post(instance.baseUrl, "ratelimit.limit", CLUSTER_ROOT_KEY, body).catch((error: Error) => ({
        status: 0,
        body: error.message,
      }));
      longestMs = Math.max(longestMs, performance.now() - started);
      statuses.set(result.status, (statuses.get(result.status) ?? 0) + 1);
      if (result.status !== 200 && !firstRefusals.has(result.status)) firstRefusals.set(result.status, result.body);
    }
  };
  const workers = [...instances, ...instances].map(worker);
  return {
    statuses,
    firstRefusals,
    answered: () => [...statuses.values()].reduce((sum, n) => sum + n, 0),
    stop: async () => {
      running = false;
      await Promise.all(workers);
      return longestMs;
    },
  };
}
