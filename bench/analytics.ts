/**
 * Analytics benchmark (see bench/README.md).
 *
 * 1. Event load vs. request latency: keygate serves an authenticated procedure (apis.getApi: root-key auth, body
 *    validation, a store read, serialisation; verification will have the same shape) to an HTTP client in a worker
 *    thread that sends BENCH_REQUEST_RATE requests per second (open loop). Every request records one verification event, as verification will; on top, a timer
 *    records extra events at a fixed rate, standing in for the rest of an instance's traffic. For each rate the
 *    client's p50/p99 and the pipeline's counters are reported: a rate is absorbed when nothing is dropped and the
 *    buffer does not grow.
 * 2. Query latency: the spec's query (per-day table) and the same aggregation over the raw table, after
 *    BENCH_ROWS events went through the pipeline, each run BENCH_QUERY_RUNS times through analytics.getVerifications.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { buildApp } from "../src/app.js";
import { validateConfig } from "../src/config/load.js";
import type { VerificationEvent, VerificationOutcome } from "../src/domain/analytics/events.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
/** Requests per second the client sends, whatever the answers do. */
const REQUEST_RATE = Number(process.env.BENCH_REQUEST_RATE ?? 2_000);
const RATES = (process.env.BENCH_RATES ?? "0,20000,50000,100000,200000").split(",").map(Number);
const ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
const QUERY_RUNS = Number(process.env.BENCH_QUERY_RUNS ?? 20);
/** analytics.buffer.batchSize; the default otherwise. */
const BATCH = process.env.BENCH_BATCH === undefined ? undefined : Number(process.env.BENCH_BATCH);
/** analytics.buffer.flushIntervalMs; the default otherwise. */
const FLUSH_MS = process.env.BENCH_FLUSH_MS === undefined ? undefined : Number(process.env.BENCH_FLUSH_MS);

const ROOT_KEY = "root_bench_analytics_everything";
const OUTCOMES: VerificationOutcome[] = ["VALID", "VALID", "VALID", "VALID", "VALID", "RATE_LIMITED", "USAGE_EXCEEDED", "NOT_FOUND", "INSUFFICIENT_PERMISSIONS", "EXPIRED"];

const SPEC_QUERY =
  "SELECT external_id, SUM(count) AS total, sumIf(count, outcome = 'VALID') AS valid FROM key_verifications_per_day_v1 WHERE time >= now() - INTERVAL 7 DAY GROUP BY external_id ORDER BY total DESC LIMIT 10";
const RAW_QUERY =
  "SELECT external_id, count() AS total, countIf(outcome = 'VALID') AS valid FROM key_verifications_v1 WHERE time >= toUnixTimestamp64Milli(now64() - INTERVAL 7 DAY) GROUP BY external_id ORDER BY total DESC LIMIT 10";

let sequence = 0;
function syntheticEvent(workspaceId: string, time: number): VerificationEvent {
  sequence++;
  return {
    requestId: `req_bench${sequence}`,
    time,
    workspaceId,
    keySpaceId: "ks_bench",
    keyId: `key_${sequence % 5_000}`,
    identityId: "",
    externalId: `user_${sequence % 1_000}`,
    outcome: OUTCOMES[sequence % OUTCOMES.length] as VerificationOutcome,
    tags: ["path=/v1/orders"],
    spentCredits: sequence % 3,
    latencyMs: 0.2 + (sequence % 10) / 10,
  };
}

/**
 * The HTTP client, in its own thread so it does not share keygate's event loop. Open loop: requests are sent at a
 * fixed rate whatever the answers do, and each latency counts from the moment the request was due, so a stalled
 * server shows as latency rather than as fewer requests.
 */
const CLIENT = `
const { parentPort, workerData } = require("node:worker_threads");
const http = require("node:http");
const { url, body, rootKey, connections, seconds, rate } = workerData;
const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
const latencies = [];
let errors = 0, pending = 0;
const interval = 1000 / rate;
const start = performance.now();
const end = start + seconds * 1000;
let due = start;
function send(dueAt) {
  pending++;
  const request = http.request(url, { method: "POST", agent, headers: { "content-type": "application/json", authorization: "Bearer " + rootKey } }, (response) => {
    response.resume();
    response.on("end", () => {
      if (response.statusCode !== 200) errors++;
      latencies.push(performance.now() - dueAt);
      done();
    });
  });
  request.on("error", () => { errors++; done(); });
  request.end(body);
}
function done() {
  pending--;
  if (pending === 0 && due >= end) { agent.destroy(); parentPort.postMessage({ latencies, errors }); }
}
function tick() {
  const now = performance.now();
  while (due <= now && due < end) { send(due); due += interval; }
  if (due < end) setTimeout(tick, 1);
}
tick();
`;

function runClient(url: string, body: string): Promise<{ latencies: number[]; errors: number }> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(CLIENT, { eval: true, workerData: { url, body, rootKey: ROOT_KEY, connections: CONNECTIONS, seconds: SECONDS, rate: REQUEST_RATE } });
    worker.once("message", resolve);
    worker.once("error", reject);
  });
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

const ms = (value: number) => value.toFixed(2);

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "keygate-bench-analytics-"));
  const config = validateConfig({
    logging: { level: "silent" },
    rootKeys: [{ key: ROOT_KEY, workspaceId: "ws_bench", permissions: ["*"] }],
    apis: [{ id: "api_bench_orders", name: "orders", workspaceId: "ws_bench" }],
    analytics: { engine: "embedded", path: dir, query: { maxExecutionMs: 60_000 }, buffer: { ...(BATCH ? { batchSize: BATCH } : {}), ...(FLUSH_MS ? { flushIntervalMs: FLUSH_MS } : {}) } },
  });
  const app = await buildApp(config, { logger: false });
  const sink = app.services.analytics.sink;
  // Each answered request records one event, as verification will (except in the baseline row).
  let recordPerRequest = false;
  app.addHook("onResponse", async () => {
    if (recordPerRequest) sink.record(syntheticEvent("ws_live", Date.now()));
  });
  const address = await app.listen({ host: "127.0.0.1", port: 0 });
  const url = `${address}/v2/apis.getApi`;
  const body = JSON.stringify({ apiId: "api_bench_orders" });

  const os = await import("node:os");
  console.log(`# analytics benchmark: ${SECONDS} s per rate, ${REQUEST_RATE} requests/s over at most ${CONNECTIONS} connections, batches of ${config.analytics.buffer.batchSize} or every ${config.analytics.buffer.flushIntervalMs} ms, node ${process.version}, ${os.cpus().length} CPUs, load average ${os.loadavg().map((n) => n.toFixed(2)).join(" ")}`);
  console.log("\n## 1. Event load vs. latency of an authenticated request\n");
  console.log("| events | requests/s | p50 ms | p99 ms | events recorded/s | events written/s | dropped | buffered at end |");
  console.log("|---:|---:|---:|---:|---:|---:|---:|---:|");
  await runClient(url, body); // warm-up: JIT, caches
  for (const rate of [-1, ...RATES]) {
    // -1: the baseline, no events at all; otherwise one event per request plus `rate` more per second.
    recordPerRequest = rate >= 0;
    await app.analytics.flush();
    const before = app.analytics.stats();
    const perTick = Math.max(0, rate) / 100;
    let carry = 0;
    const timer = setInterval(() => {
      carry += perTick;
      const now = Date.now();
      for (; carry >= 1; carry--) sink.record(syntheticEvent("ws_live", now));
    }, 10);
    const started = performance.now();
    const { latencies, errors } = await runClient(url, body);
    const elapsedS = (performance.now() - started) / 1000;
    clearInterval(timer);
    const after = app.analytics.stats();
    const sorted = latencies.sort((a, b) => a - b);
    const dropped = after.dropped.bufferFull + after.dropped.writeFailed - (before.dropped.bufferFull + before.dropped.writeFailed);
    console.log(
      `| ${rate < 0 ? "none (baseline)" : `1 per request + ${rate}/s`} | ${Math.round(latencies.length / elapsedS)} | ${ms(percentile(sorted, 50))} | ${ms(percentile(sorted, 99))} | ${Math.round((after.recorded - before.recorded) / elapsedS)} | ${Math.round((after.written - before.written) / elapsedS)} | ${dropped} | ${after.buffered} |${errors ? ` ${errors} errors` : ""}`,
    );
  }

  console.log(`\n## 2. Query latency over ${ROWS} events (7 days, 1000 external ids, 5000 keys)\n`);
  // Start from an empty buffer: whatever the last rate left behind is written first.
  await app.analytics.flush();
  const droppedBefore = app.analytics.stats().dropped;
  const loadStarted = performance.now();
  const now = Date.now();
  const span = 7 * 24 * 3_600_000 - 3_600_000;
  for (let n = 0; n < ROWS; n++) {
    sink.record(syntheticEvent("ws_bench", now - Math.floor((n / ROWS) * span)));
    // Let the pipeline keep up, as a steady stream would.
    if (n % 20_000 === 19_999) await app.analytics.flush();
  }
  await app.analytics.flush();
  const loadS = (performance.now() - loadStarted) / 1000;
  const stats = app.analytics.stats();
  const droppedWhileLoading = stats.dropped.bufferFull + stats.dropped.writeFailed - (droppedBefore.bufferFull + droppedBefore.writeFailed);
  console.log(`loaded in ${loadS.toFixed(1)} s (${Math.round(ROWS / loadS)} events/s through record() and the pipeline, flushing every 20,000); dropped: ${droppedWhileLoading}\n`);

  console.log("| query | runs | min ms | p50 ms | p95 ms | max ms | rows |");
  console.log("|---|---:|---:|---:|---:|---:|---:|");
  for (const [name, query] of [["spec query, key_verifications_per_day_v1", SPEC_QUERY], ["same aggregation, key_verifications_v1 (raw)", RAW_QUERY]] as const) {
    const times: number[] = [];
    let rows = 0;
    for (let run = 0; run < QUERY_RUNS; run++) {
      const started = performance.now();
      const response = await app.inject({ method: "POST", url: "/v2/analytics.getVerifications", headers: { authorization: `Bearer ${ROOT_KEY}`, "content-type": "application/json" }, payload: { query } });
      times.push(performance.now() - started);
      if (response.statusCode !== 200) throw new Error(`${name}: ${response.statusCode} ${response.body}`);
      rows = response.json().data.length;
    }
    times.sort((a, b) => a - b);
    console.log(`| ${name} | ${QUERY_RUNS} | ${ms(times[0] as number)} | ${ms(percentile(times, 50))} | ${ms(percentile(times, 95))} | ${ms(times[times.length - 1] as number)} | ${rows} |`);
  }
  const [check] = (
    await app.inject({ method: "POST", url: "/v2/analytics.getVerifications", headers: { authorization: `Bearer ${ROOT_KEY}`, "content-type": "application/json" }, payload: { query: "SELECT count() AS raw FROM key_verifications_v1" } })
  ).json().data;
  console.log(`\nrows in key_verifications_v1 for the workspace: ${check.raw}`);

  await app.close();
  rmSync(dir, { recursive: true, force: true });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
