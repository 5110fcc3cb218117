/**
 * Analytics benchmark (see bench/README.md).
 *
 *   npm run bench:analytics -- [--duration 10] [--request-rate 2000] [--connections 64] [--event-rates 0,20000,50000,100000,200000]
 *                              [--rows 1000000] [--query-runs 20] [--batch N] [--flush-ms N]
 *
 * 1. Event load vs. request latency: keygate serves an authenticated procedure (apis.getApi: root-key auth, body
 *    validation, a store read, serialisation) to an HTTP client in a worker thread that sends --request-rate
 *    requests per second (open loop). Every request records one verification event, as verification does; on top,
 *    a timer records extra events at each of --event-rates, standing in for the rest of an instance's traffic. For
 *    each rate the client's p50/p99 and the pipeline's counters are reported: a rate is absorbed when nothing is
 *    dropped and the buffer does not grow.
 * 2. Query latency: the example query of docs/decisions.md#analytics (per-day table) and the same aggregation over
 *    the raw table, after --rows events went through the pipeline, each run --query-runs times through
 *    analytics.getVerifications.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Worker } from "node:worker_threads";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../src/app.js";
import { validateConfig } from "../src/config/load.js";
import type { VerificationEvent } from "../src/domain/analytics/events.js";
import type { VerificationCode } from "../src/domain/verification/codes.js";
import { defined } from "../src/lib/defined.js";

const { values: args } = parseArgs({
  options: {
    duration: { type: "string", default: "10" },
    "request-rate": { type: "string", default: "2000" },
    connections: { type: "string", default: "64" },
    "event-rates": { type: "string", default: "0,20000,50000,100000,200000" },
    rows: { type: "string", default: "1000000" },
    "query-runs": { type: "string", default: "20" },
    batch: { type: "string" },
    "flush-ms": { type: "string" },
  },
  strict: false,
});
const numberOption = (name: string): number => {
  const value = Number(args[name]);
  if (!Number.isFinite(value) || value < 0) throw new Error(`--${name} must be a number, not '${String(args[name])}'`);
  return value;
};
/** Seconds each event rate is measured for. */
const SECONDS = numberOption("duration");
/** Requests per second the client sends, whatever the answers do. */
const REQUEST_RATE = numberOption("request-rate");
const CONNECTIONS = numberOption("connections");
const RATES = String(args["event-rates"]).split(",").map(Number);
const ROWS = numberOption("rows");
const QUERY_RUNS = numberOption("query-runs");
/** analytics.buffer.batchSize and flushIntervalMs; the defaults when not given. */
const BATCH = args.batch === undefined ? undefined : numberOption("batch");
const FLUSH_MS = args["flush-ms"] === undefined ? undefined : numberOption("flush-ms");

const ROOT_KEY = "root_bench_analytics_everything";
const OUTCOMES: VerificationCode[] = [
  "VALID",
  "VALID",
  "VALID",
  "VALID",
  "VALID",
  "RATE_LIMITED",
  "USAGE_EXCEEDED",
  "NOT_FOUND",
  "INSUFFICIENT_PERMISSIONS",
  "EXPIRED",
];

const EXAMPLE_QUERY =
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
    outcome: OUTCOMES[sequence % OUTCOMES.length] as VerificationCode,
    tags: ["path=/v1/orders"],
    spentCredits: sequence % 3,
    creditsSource: sequence % 3 === 0 ? "" : "key",
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
    const worker = new Worker(CLIENT, {
      eval: true,
      workerData: { url, body, rootKey: ROOT_KEY, connections: CONNECTIONS, seconds: SECONDS, rate: REQUEST_RATE },
    });
    worker.once("message", resolve);
    worker.once("error", reject);
  });
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

const ms = (value: number) => value.toFixed(2);

/** Records `perSecond` extra events (in ticks of 10 ms) until the returned function is called. */
function recordExtraEvents(app: FastifyInstance, perSecond: number): () => void {
  const perTick = perSecond / 100;
  let carry = 0;
  const timer = setInterval(() => {
    carry += perTick;
    const now = Date.now();
    for (; carry >= 1; carry--) app.services.analytics.sinks.verifications.record(syntheticEvent("ws_live", now));
  }, 10);
  return () => clearInterval(timer);
}

const dropped = (stats: ReturnType<FastifyInstance["analytics"]["stats"]>) => stats.dropped.bufferFull + stats.dropped.writeFailed;

/**
 * Part 1: a table row per event rate, the first without events at all. `perRequest.record` says whether each
 * answered request records an event (the app's onResponse hook reads it).
 */
async function measureEventLoad(app: FastifyInstance, url: string, body: string, perRequest: { record: boolean }): Promise<void> {
  console.log("\n## 1. Event load vs. latency of an authenticated request\n");
  console.log("| events | requests/s | p50 ms | p99 ms | events recorded/s | events written/s | dropped | buffered at end |");
  console.log("|---:|---:|---:|---:|---:|---:|---:|---:|");
  await runClient(url, body); // warm-up: JIT, caches
  for (const rate of [-1, ...RATES]) {
    // -1: the baseline, no events at all; otherwise one event per request plus `rate` more per second.
    perRequest.record = rate >= 0;
    await app.analytics.flush();
    const before = app.analytics.stats();
    const stopExtra = recordExtraEvents(app, Math.max(0, rate));
    const started = performance.now();
    const { latencies, errors } = await runClient(url, body);
    const elapsedS = (performance.now() - started) / 1000;
    stopExtra();
    const after = app.analytics.stats();
    const sorted = latencies.sort((a, b) => a - b);
    const cells = [
      rate < 0 ? "none (baseline)" : `1 per request + ${rate}/s`,
      Math.round(latencies.length / elapsedS),
      ms(percentile(sorted, 50)),
      ms(percentile(sorted, 99)),
      Math.round((after.recorded - before.recorded) / elapsedS),
      Math.round((after.written - before.written) / elapsedS),
      dropped(after) - dropped(before),
      after.buffered,
    ];
    console.log(`| ${cells.join(" | ")} |${errors ? ` ${errors} errors` : ""}`);
  }
}

/** Part 2: ROWS events over 7 days through the pipeline, then the two queries QUERY_RUNS times each. */
async function measureQueries(app: FastifyInstance): Promise<void> {
  console.log(`\n## 2. Query latency over ${ROWS} events (7 days, 1000 external ids, 5000 keys)\n`);
  // Start from an empty buffer: whatever the last rate left behind is written first.
  await app.analytics.flush();
  const droppedBefore = dropped(app.analytics.stats());
  const loadStarted = performance.now();
  const now = Date.now();
  const span = 7 * 24 * 3_600_000 - 3_600_000;
  for (let n = 0; n < ROWS; n++) {
    app.services.analytics.sinks.verifications.record(syntheticEvent("ws_bench", now - Math.floor((n / ROWS) * span)));
    // Let the pipeline keep up, as a steady stream would.
    if (n % 20_000 === 19_999) await app.analytics.flush();
  }
  await app.analytics.flush();
  const loadS = (performance.now() - loadStarted) / 1000;
  console.log(
    `loaded in ${loadS.toFixed(1)} s (${Math.round(ROWS / loadS)} events/s through record() and the pipeline, flushing every 20,000); dropped: ${dropped(app.analytics.stats()) - droppedBefore}\n`,
  );

  const query = async (sql: string) => {
    const response = await app.inject({
      method: "POST",
      url: "/v2/analytics.getVerifications",
      headers: { authorization: `Bearer ${ROOT_KEY}`, "content-type": "application/json" },
      payload: { query: sql },
    });
    if (response.statusCode !== 200) throw new Error(`${sql}: ${response.statusCode} ${response.body}`);
    return response.json().data as Record<string, unknown>[];
  };
  console.log("| query | runs | min ms | p50 ms | p95 ms | max ms | rows |");
  console.log("|---|---:|---:|---:|---:|---:|---:|");
  for (const [name, sql] of [
    ["example query, key_verifications_per_day_v1", EXAMPLE_QUERY],
    ["same aggregation, key_verifications_v1 (raw)", RAW_QUERY],
  ] as const) {
    const times: number[] = [];
    let rows = 0;
    for (let run = 0; run < QUERY_RUNS; run++) {
      const started = performance.now();
      rows = (await query(sql)).length;
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    console.log(
      `| ${name} | ${QUERY_RUNS} | ${ms(times[0] as number)} | ${ms(percentile(times, 50))} | ${ms(percentile(times, 95))} | ${ms(times[times.length - 1] as number)} | ${rows} |`,
    );
  }
  const [check] = await query("SELECT count() AS raw FROM key_verifications_v1");
  console.log(`\nrows in key_verifications_v1 for the workspace: ${String(check?.raw)}`);
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "keygate-bench-analytics-"));
  const config = validateConfig({
    logging: { level: "silent" },
    rootKeys: [{ key: ROOT_KEY, workspaceId: "ws_bench", permissions: ["*"] }],
    apis: [{ id: "api_bench_orders", name: "orders", workspaceId: "ws_bench" }],
    analytics: {
      engine: "embedded",
      path: dir,
      query: { maxExecutionMs: 60_000 },
      buffer: defined({ batchSize: BATCH, flushIntervalMs: FLUSH_MS }),
    },
  });
  const app = await buildApp(config, { logger: false });
  // Each answered request records one event, as verification does (except in the baseline row).
  const perRequest = { record: false };
  app.addHook("onResponse", async () => {
    if (perRequest.record) app.services.analytics.sinks.verifications.record(syntheticEvent("ws_live", Date.now()));
  });
  const address = await app.listen({ host: "127.0.0.1", port: 0 });
  const { batchSize, flushIntervalMs } = config.analytics.buffer;
  console.log(
    `# analytics benchmark: ${SECONDS} s per rate, ${REQUEST_RATE} requests/s over at most ${CONNECTIONS} connections, batches of ${batchSize} or every ${flushIntervalMs} ms, node ${process.version}, ${cpus().length} CPUs, load average ${loadavg()
      .map((n) => n.toFixed(2))
      .join(" ")}`,
  );
  await measureEventLoad(app, `${address}/v2/apis.getApi`, JSON.stringify({ apiId: "api_bench_orders" }), perRequest);
  await measureQueries(app);
  await app.close();
  rmSync(dir, { recursive: true, force: true });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
