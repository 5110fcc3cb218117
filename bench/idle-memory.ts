/**
 * Idle memory: the resident set of keygate, as `node dist/server.js` starts it on in-memory stores, some seconds
 * after start, beside a bare Fastify app's, in one run. Each target is a child process of its own, started one after
 * the other so that none starts while another is measured; a target with workers is measured process by process,
 * once its last worker has run for the wait too.
 *
 *   npm run build:test && node build/bench/idle-memory.js [--wait 10] [--entry build/src/server.js]
 *
 * `--entry` names the server script to start (another checkout's `dist/server.js`, to compare two versions).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    wait: { type: "string", default: "10" },
    entry: { type: "string", default: fileURLToPath(new URL("../src/server.js", import.meta.url)) },
    serve: { type: "string" },
  },
});

/** The bare baseline: Fastify with one route, listening, nothing else loaded. */
async function serveBareFastify(): Promise<void> {
  const { default: Fastify } = await import("fastify");
  const app = Fastify();
  app.get("/", async () => ({ ok: true }));
  await app.listen({ host: "127.0.0.1", port: 0 });
}

interface Memory {
  rss: number;
  anon: number;
  file: number;
}

/** VmRSS, RssAnon and RssFile of a process, in MB, from /proc (Linux). */
function memoryOf(pid: number): Memory {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN);
  return { rss: kb("VmRSS") / 1024, anon: kb("RssAnon") / 1024, file: kb("RssFile") / 1024 };
}

/** The processes a process forked (a keygate primary's workers). */
function childrenOf(pid: number): number[] {
  const out = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim();
  return out === "" ? [] : out.split(/\s+/).map(Number);
}

interface Target {
  name: string;
  args: string[];
  env: Record<string, string>;
  /** The processes it forks (its workers): each is measured once it too has run for the wait. */
  workers?: number;
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** Starts a target, waits, reads the memory of it and of its children, stops it. */
async function measure(target: Target, waitMs: number, directory: string): Promise<Array<{ name: string } & Memory>> {
  const child: ChildProcess = spawn(process.execPath, target.args, {
    cwd: directory,
    env: { ...process.env, ...target.env },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  try {
    const pid = child.pid as number;
    // A primary forks its first worker, and the others once it listens: the wait starts when the last is forked.
    while (child.exitCode === null && childrenOf(pid).length < (target.workers ?? 0)) await sleep(100);
    await sleep(waitMs);
    if (child.exitCode !== null) throw new Error(`${target.name} exited early (${child.exitCode})`);
    const rows = [{ name: target.name, ...memoryOf(pid) }];
    childrenOf(pid).forEach((worker, index) => {
      rows.push({ name: `  worker ${index + 1}`, ...memoryOf(worker) });
    });
    return rows;
  } finally {
    child.kill("SIGTERM");
    await exited;
  }
}

async function drive(): Promise<void> {
  // Imported here, not at the top: the bare child runs this file too, and must load nothing but Fastify.
  const { deleteByPrefix, REDIS_URL } = await import("./side-by-side/redis.js");
  const waitMs = Number(values.wait) * 1000;
  const entry = resolve(values.entry);
  const self = fileURLToPath(import.meta.url);
  const prefix = `kgbench:${randomBytes(4).toString("hex")}`;
  const directory = mkdtempSync(join(tmpdir(), "keygate-idle-"));
  const quiet = { PORT: "0", HOST: "127.0.0.1" };
  const targets: Target[] = [
    { name: "bare Fastify", args: [self, "--serve", "bare"], env: {} },
    { name: "keygate, analytics off", args: [entry], env: { ...quiet, KEYGATE_ANALYTICS_ENGINE: "off" } },
    {
      name: "keygate, embedded analytics",
      args: [entry],
      env: { ...quiet, KEYGATE_ANALYTICS_ENGINE: "embedded", KEYGATE_ANALYTICS_PATH: join(directory, "analytics") },
    },
    {
      name: "keygate, 2 workers (Redis)",
      args: [entry],
      workers: 2,
      env: {
        ...quiet,
        KEYGATE_WORKERS: "2",
        REDIS_URL,
        KEYGATE_REDIS_PREFIX: prefix,
        KEYGATE_ANALYTICS_PATH: join(directory, "analytics-workers"),
      },
    },
  ];
  console.log(`idle memory ${values.wait} s after start, ${entry}, MB`);
  console.log(`${"target".padEnd(30)}${"RSS".padStart(8)}${"anon".padStart(8)}${"file".padStart(8)}`);
  try {
    for (const target of targets) {
      for (const row of await measure(target, waitMs, directory)) {
        const mb = (value: number) => value.toFixed(1).padStart(8);
        console.log(`${row.name.padEnd(30)}${mb(row.rss)}${mb(row.anon)}${mb(row.file)}`);
      }
    }
  } finally {
    await deleteByPrefix(prefix);
    rmSync(directory, { recursive: true, force: true });
  }
}

if (values.serve === "bare") await serveBareFastify();
else await drive();
