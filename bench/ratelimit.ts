/**
 * ratelimit.limit on Redis against a bare Fastify route, measured side by side in one run.
 *
 *   npm run bench:ratelimit -- [--duration 30] [--slice 2] [--connections 50]
 *
 * The parent process drives the load (autocannon); a child process serves both targets, so the load generator
 * and the servers do not share an event loop. Each target gets `duration` seconds in all, cut into `slice`-second
 * measurements that alternate between the targets, so that other work on the machine hits them alike. The ratio
 * is total requests over total requests in equal time. See bench/README.md.
 */
import { fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import autocannon from "autocannon";
import Fastify from "fastify";
import { Redis } from "ioredis";
import { buildApp } from "../src/app.js";
import { validateConfig } from "../src/config/load.js";

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const ROOT_KEY = "root_bench_all_permissions";

interface Targets {
  bare: string;
  keygate: string;
  prefix: string;
}

/** The child: a bare route answering a fixed body, and keygate on Redis stores, on ports picked by the OS. */
async function serve(): Promise<void> {
  const bare = Fastify({ logger: false });
  const fixed = { meta: { requestId: "req_bench" }, data: { limit: 1_000_000, remaining: 999_999, reset: 0, success: true } };
  bare.post("/v2/ratelimit.limit", async () => fixed);
  const bareUrl = await bare.listen({ host: "127.0.0.1", port: 0 });

  const prefix = `kgbench:${randomBytes(4).toString("hex")}`;
  const config = validateConfig({
    storage: { redis: { url: REDIS_URL, prefix } },
    rootKeys: [{ key: ROOT_KEY, workspaceId: "ws_bench", permissions: ["*"] }],
    logging: { level: "silent" },
  });
  const keygate = await buildApp(config, { logger: false });
  const keygateUrl = await keygate.listen({ host: "127.0.0.1", port: 0 });
  process.send?.({ bare: bareUrl, keygate: keygateUrl, prefix } satisfies Targets);
  process.on("message", async () => {
    await Promise.all([bare.close(), keygate.close()]);
    process.exit(0);
  });
}

interface Measurement {
  requests: number;
  seconds: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

/** Drives `url` with POSTs whose bodies come from `body` (called per request, so bodies may differ). */
async function measure(url: string, body: () => string, options: { duration: number; connections: number }): Promise<Measurement> {
  const result = await autocannon({
    url,
    connections: options.connections,
    duration: options.duration,
    requests: [
      {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${ROOT_KEY}` },
        setupRequest: (request) => ({ ...request, body: body() }),
      },
    ],
  });
  return { requests: result.requests.total, seconds: result.duration, p50: result.latency.p50, p99: result.latency.p99, non2xx: result.non2xx, errors: result.errors };
}

async function deleteByPrefix(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL);
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1_000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== "0");
  redis.disconnect();
}

/** Slices of one target summed up: requests per second over all of them, and the median slice's p50 and p99. */
function summary(slices: Measurement[]): { requestsPerSecond: number; p50: number; p99: number; failures: number } {
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
  return {
    requestsPerSecond: slices.reduce((sum, m) => sum + m.requests, 0) / slices.reduce((sum, m) => sum + m.seconds, 0),
    p50: median(slices.map((m) => m.p50)),
    p99: median(slices.map((m) => m.p99)),
    failures: slices.reduce((sum, m) => sum + m.non2xx + m.errors, 0),
  };
}

function line(label: string, slices: Measurement[]): string {
  const m = summary(slices);
  return `${label.padEnd(36)} ${m.requestsPerSecond.toFixed(0).padStart(7)} req/s   p50 ${String(m.p50).padStart(3)} ms   p99 ${String(m.p99).padStart(3)} ms${m.failures > 0 ? `   (${m.failures} non-2xx or errors)` : ""}`;
}

async function drive(): Promise<void> {
  const { values } = parseArgs({
    options: { duration: { type: "string", default: "30" }, slice: { type: "string", default: "2" }, connections: { type: "string", default: "50" } },
  });
  const slice = Number(values.slice);
  const slices = Math.max(1, Math.round(Number(values.duration) / slice));
  const connections = Number(values.connections);

  const child = fork(fileURLToPath(import.meta.url), ["--serve"], { stdio: "inherit" });
  const targets = await new Promise<Targets>((resolve) => child.once("message", (message) => resolve(message as Targets)));
  // Admitted path: a limit never reached, a new identifier per request (every call is decided on Redis).
  let caller = 0;
  const admitted = () => JSON.stringify({ namespace: "bench", identifier: `caller-${caller++}`, limit: 1_000_000, duration: 60_000 });
  // Denied path: one identifier far over its limit (after the first call, decided by the local fast path).
  const denied = () => JSON.stringify({ namespace: "bench", identifier: "one-caller", limit: 1, duration: 60_000 });
  const keygateUrl = `${targets.keygate}/v2/ratelimit.limit`;

  console.log(`ratelimit.limit vs a bare Fastify route: ${connections} connections, ${slices} × ${slice} s per target, interleaved; Redis ${REDIS_URL}`);
  await measure(keygateUrl, admitted, { duration: 2, connections }); // warm-up
  const runs = { bare: [] as Measurement[], keygate: [] as Measurement[], denied: [] as Measurement[] };
  for (let i = 0; i < slices; i++) {
    runs.bare.push(await measure(`${targets.bare}/v2/ratelimit.limit`, admitted, { duration: slice, connections }));
    runs.keygate.push(await measure(keygateUrl, admitted, { duration: slice, connections }));
    runs.denied.push(await measure(keygateUrl, denied, { duration: slice, connections }));
    process.stdout.write(".");
  }
  const sliceRatios = runs.keygate.map((m, i) => m.requests / (runs.bare[i] as Measurement).requests).sort((a, b) => a - b);
  const total = (ms: Measurement[]) => ms.reduce((sum, m) => sum + m.requests, 0);
  console.log("\n");
  console.log(line("bare Fastify route", runs.bare));
  console.log(line("keygate ratelimit.limit (Redis)", runs.keygate));
  console.log(line("keygate, denied (local fast path)", runs.denied));
  console.log(
    `\nratio keygate / bare: ${(total(runs.keygate) / total(runs.bare)).toFixed(2)} (target >= 0.50; per slice ${(sliceRatios[0] as number).toFixed(2)}..${(sliceRatios.at(-1) as number).toFixed(2)}, median ${(sliceRatios[Math.floor(sliceRatios.length / 2)] as number).toFixed(2)}); denied path ${(total(runs.denied) / total(runs.bare)).toFixed(2)}`,
  );

  child.send("stop");
  await new Promise((resolve) => child.once("exit", resolve));
  await deleteByPrefix(targets.prefix);
}

if (process.argv.includes("--serve")) await serve();
else await drive();
