/**
 * Management write latency: what "durable before the answer" costs (docs/audit-log.md#what-survives-what).
 *
 *   node build/bench/management-writes.js [--writes 400] [--concurrency 16]
 *
 * In process (Fastify's inject, no sockets), for each setup: --writes apis.createApi one at a time, then --writes
 * keys.createKey with a webhook endpoint subscribed to key.created, --concurrency at a time. Reports p50 and p99 of
 * each. Setups: in-memory stores with the embedded engine (the entry goes to the journal, fsync'd), and Redis stores
 * (REDIS_URL, a prefix of its own, deleted after) with the embedded engine (the entry and the notice go to Redis).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { buildApp } from "../src/app.js";
import { validateConfig } from "../src/config/load.js";
import { deleteByPrefix, REDIS_URL } from "./side-by-side/redis.js";

const { values } = parseArgs({
  options: { writes: { type: "string", default: "400" }, concurrency: { type: "string", default: "16" } },
});
const WRITES = Number(values.writes);
const CONCURRENCY = Number(values.concurrency);
const ROOT_KEY = "root_bench_management_writes";

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

function summary(latencies: number[]): string {
  const sorted = [...latencies].sort((a, b) => a - b);
  return `p50 ${percentile(sorted, 50).toFixed(2)} ms, p99 ${percentile(sorted, 99).toFixed(2)} ms (n=${sorted.length})`;
}

async function run(name: string, storage: Record<string, unknown>): Promise<void> {
  const directory = mkdtempSync(join(tmpdir(), "keygate-bench-writes-"));
  const app = await buildApp(
    validateConfig({
      ...storage,
      rootKeys: [{ key: ROOT_KEY, workspaceId: "ws_bench", permissions: ["*"] }],
      apis: [{ id: "api_bench", name: "bench", workspaceId: "ws_bench" }],
      analytics: { engine: "embedded", path: directory },
      webhooks: { deliver: false, allowPrivateAddresses: true },
      logging: { level: "warn" },
    }),
    { logger: false },
  );
  const call = async (procedure: string, body: unknown): Promise<number> => {
    const started = performance.now();
    const response = await app.inject({
      method: "POST",
      url: `/v2/${procedure}`,
      headers: { authorization: `Bearer ${ROOT_KEY}`, "content-type": "application/json" },
      payload: JSON.stringify(body),
    });
    const elapsed = performance.now() - started;
    if (response.statusCode !== 200) throw new Error(`${procedure} answered ${response.statusCode}: ${response.body}`);
    return elapsed;
  };
  try {
    await call("keygate.createWebhook", { url: "http://127.0.0.1:9/hook", events: ["key.created"] });
    // Warm-up: the first calls compile schemas and open the engine's connection.
    for (let index = 0; index < 20; index++) await call("apis.createApi", { name: `warm-${index}` });
    const sequential: number[] = [];
    for (let index = 0; index < WRITES; index++) sequential.push(await call("apis.createApi", { name: `bench-${index}` }));
    const concurrent: number[] = [];
    for (let start = 0; start < WRITES; start += CONCURRENCY) {
      const batch = Array.from({ length: Math.min(CONCURRENCY, WRITES - start) }, () => call("keys.createKey", { apiId: "api_bench" }));
      concurrent.push(...(await Promise.all(batch)));
    }
    console.log(`${name}: apis.createApi one at a time: ${summary(sequential)}`);
    console.log(`${name}: keys.createKey (a webhook subscribed), ${CONCURRENCY} at a time: ${summary(concurrent)}`);
  } finally {
    await app.close();
    rmSync(directory, { recursive: true, force: true });
  }
}

await run("memory + embedded", {});
const prefix = `bench-writes-${process.pid}`;
try {
  await run("redis + embedded", { storage: { redis: { url: REDIS_URL, prefix } } });
} finally {
  await deleteByPrefix(prefix);
}
