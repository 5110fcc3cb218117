/**
 * Millions of keys: keygate on a Redis of its own holding `--keys` keys (default 1,000,000) imported with
 * keys.migrateKeys, 10,000 a call, as an operator would. Measures the import's time, the Redis memory a key takes
 * (INFO used_memory before and after), keys.verifyKey for keys drawn uniformly from all of them (nearly every one a
 * cache miss) against one cached key, side by side, and keygate's resident memory after that load, with a cache
 * budget of `--cache-mb` (64) and analytics off. One keygate imports, another (started after) verifies.
 *
 *   npm run build:test && node build/bench/million-keys.js [--keys 1000000] [--duration 10] [--slice 2] [--connections 50] [--cache-mb 64]
 *
 * The Redis is a redis-server started on a free port for the run (the shared one is never filled), stopped after.
 * keygate's Redis deadline is 5 s rather than 500 ms, so that a busy shared machine does not fail the import.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { BENCH_WORKSPACE, callKeygate, ROOT_KEY, startKeygate } from "./side-by-side/keygate.js";
import { interleave, type Target } from "./side-by-side/load.js";
import { describeRun, runOptions } from "./side-by-side/options.js";
import { benchmark, forkServing, stopAll } from "./side-by-side/processes.js";
import { printRatio, printTargets } from "./side-by-side/report.js";

const API_ID = "api_bench_million";
const MIGRATION = "bench";
const PER_CALL = 10_000;

const { values } = parseArgs({
  options: { keys: { type: "string", default: "1000000" }, "cache-mb": { type: "string", default: "64" } },
  strict: false,
});
const KEYS = Number(values.keys);
const CACHE_MB = Number(values["cache-mb"]);

/** The plaintext of key n; keygate stores the hex SHA-256 of it, as the sha256-hex scheme imports it. */
const plaintext = (n: number) => `mk_${n}`;

/**
 * keygate in a process of its own, on the run's Redis and prefix (REDIS_URL and BENCH_PREFIX, set by the driver
 * before forking). The keys are imported through one such process and verified through another, started after: the
 * measured one is a sidecar that only verifies, its memory that of verification and its caches.
 */
async function startKeygateServing() {
  const keygate = await startKeygate({
    apiId: API_ID,
    analytics: { engine: "off" },
    cache: { maxBytes: CACHE_MB * 1024 * 1024 },
    // A shared, loaded machine can hold a pipeline of a thousand writes past the default 500 ms deadline.
    redis: { prefix: process.env.BENCH_PREFIX, commandTimeoutMs: 5_000 },
    migrations: [{ id: MIGRATION, workspaceId: BENCH_WORKSPACE, scheme: "sha256-hex" }],
  });
  return { served: { url: keygate.url, pid: String(process.pid) }, close: () => keygate.close() };
}

async function drive(): Promise<void> {
  if (!Number.isInteger(KEYS) || KEYS < PER_CALL) throw new Error(`--keys must be a whole number of at least ${PER_CALL}`);
  const options = await runOptions();
  const redis = await startRedis();
  process.env.REDIS_URL = redis.url;
  process.env.BENCH_PREFIX = "kgbench:million";
  const probe = new Redis(redis.url);
  try {
    const importer = await forkServing(import.meta.url, "keygate");
    const importerUrl = importer.served.url as string;

    const memoryBefore = await usedMemory(probe);
    const importStarted = performance.now();
    for (let start = 0; start < KEYS; start += PER_CALL) {
      const keys = [];
      for (let n = start; n < Math.min(KEYS, start + PER_CALL); n++) {
        keys.push({ hash: createHash("sha256").update(plaintext(n)).digest("hex"), name: `customer ${n}` });
      }
      const result = await callKeygate(importerUrl, "keys.migrateKeys", { migrationId: MIGRATION, apiId: API_ID, keys });
      if ((result.failed as unknown[]).length > 0) throw new Error(`keys.migrateKeys refused ${(result.failed as unknown[]).length} keys`);
      if ((start / PER_CALL) % 10 === 9) process.stdout.write(`${start + PER_CALL} keys imported\n`);
    }
    const importSeconds = (performance.now() - importStarted) / 1_000;
    const bytesPerKey = ((await usedMemory(probe)) - memoryBefore) / KEYS;
    const rssOfImporter = rssMb(Number(importer.served.pid));
    await stopAll(importer);
    const keygateChild = await forkServing(import.meta.url, "keygate");
    const { url, pid } = keygateChild.served as { url: string; pid: string };
    const rssAtStart = rssMb(Number(pid));

    const headers = { "content-type": "application/json", authorization: `Bearer ${ROOT_KEY}` };
    const verifyUrl = `${url}/v2/keys.verifyKey`;
    // Both bodies are built per request the same way, so the load generator's cost is alike.
    const oneKey: Target = {
      label: "keys.verifyKey, one cached key",
      url: verifyUrl,
      servedBy: keygateChild,
      method: "POST",
      headers,
      body: { drawn: '{"key":"mk_{n}"}', from: 1 },
    };
    const drawn: Target = {
      label: `keys.verifyKey, keys drawn from ${KEYS}`,
      url: verifyUrl,
      servedBy: keygateChild,
      method: "POST",
      headers,
      body: { drawn: '{"key":"mk_{n}"}', from: KEYS },
    };
    console.log(
      describeRun("A million keys: keys.verifyKey", options, [
        `${KEYS} keys on a Redis of its own (${redis.url})`,
        `cache.maxBytes ${CACHE_MB} MiB`,
        "analytics off",
      ]),
    );
    const runs = await interleave([oneKey, drawn], options, redis.url);
    const rssAfterLoad = rssMb(Number(pid));
    const check = await callKeygate(url, "keys.verifyKey", { key: plaintext(KEYS - 1) });
    if (check.valid !== true) throw new Error(`the last key imported does not verify: ${String(check.code)}`);
    printTargets(runs);
    console.log();
    printRatio(runs, drawn, oneKey, 0.5);
    console.log();
    console.log(`import: ${KEYS} keys in ${importSeconds.toFixed(1)} s (${Math.round(KEYS / importSeconds)} keys/s, ${PER_CALL} a call)`);
    console.log(`Redis: ${bytesPerKey.toFixed(0)} bytes a key (INFO used_memory, goal <= 450)`);
    console.log(
      `keygate RSS: ${rssAtStart.toFixed(0)} MB at start, ${rssAfterLoad.toFixed(0)} MB after the load (goal <= 256); ` +
        `the importing instance: ${rssOfImporter.toFixed(0)} MB after the import`,
    );
    await stopAll(keygateChild);
  } finally {
    probe.disconnect();
    await redis.stop();
  }
}

async function usedMemory(redis: Redis): Promise<number> {
  return Number(/^used_memory:(\d+)/m.exec(await redis.info("memory"))?.[1]);
}

/** VmRSS of a process, in MB (Linux). */
function rssMb(pid: number): number {
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) / 1024;
}

/** A redis-server without persistence on a free loopback port, for this run only. */
async function startRedis(): Promise<{ url: string; stop(): Promise<void> }> {
  const port = await new Promise<number>((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
  const child: ChildProcess = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
    stdio: "ignore",
  });
  const url = `redis://127.0.0.1:${port}`;
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on("error", () => {});
  for (let attempt = 0; ; attempt++) {
    try {
      await probe.connect();
      await probe.ping();
      break;
    } catch (error) {
      if (attempt > 100) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  probe.disconnect();
  return {
    url,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

await benchmark(drive, { keygate: startKeygateServing });
