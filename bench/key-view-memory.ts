/**
 * What a cached key costs the heap: N keys imported into memory stores, each verified once (so its view is cached),
 * the heap measured after a full GC before and after (v8.getHeapStatistics), against what the key cache estimates
 * for them (its bytes under cache.maxBytes). The budget is set large enough to hold them all. Run with --expose-gc:
 *
 *   npm run build:test && node --expose-gc build/bench/key-view-memory.js [--keys 50000]
 */
import { createHash } from "node:crypto";
import { parseArgs } from "node:util";
import { getHeapStatistics } from "node:v8";
import { validateConfig } from "../src/config/load.js";
import { systemClock } from "../src/lib/clock.js";
import { createServices } from "../src/services.js";
import { createMemoryStores } from "../src/storage/index.js";

const { values } = parseArgs({ options: { keys: { type: "string", default: "50000" } } });
const count = Number(values.keys);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc");

const WORKSPACE = "ws_bench";
const config = validateConfig({
  rootKeys: [{ key: "root_bench_memory", workspaceId: WORKSPACE, permissions: ["*"] }],
  apis: [{ id: "api_bench_memory", name: "bench", workspaceId: WORKSPACE }],
  migrations: [{ id: "bench", workspaceId: WORKSPACE, scheme: "sha256-hex" }],
  analytics: { engine: "off" },
  logging: { level: "silent" },
  cache: { maxBytes: 64 * 1024 * 1024 * 1024 },
});
const stores = createMemoryStores();
const services = createServices(stores, config, systemClock);
for (const api of config.apis) await services.apis.declare(api);

/** The plaintext of key n; its stored hash is the hex SHA-256, as the sha256-hex scheme imports it. */
const plaintext = (n: number) => `bench_memory_${n.toString(36).padStart(8, "0")}`;
const caller = services.rootKeys.operator(WORKSPACE);
for (let start = 0; start < count; start += 10_000) {
  const keys = [];
  for (let n = start; n < Math.min(count, start + 10_000); n++) {
    keys.push({
      hash: createHash("sha256").update(plaintext(n)).digest("hex"),
      name: `customer ${n}`,
      permissions: ["orders.read", "orders.write"],
      enabled: true,
    });
  }
  await services.keyMigrations.migrateKeys(caller, { migrationId: "bench", apiId: "api_bench_memory", keys });
}

const verifyAll = async () => {
  for (let n = 0; n < count; n++) {
    const verification = await services.verification.verify({
      requestId: "req_bench",
      source: "api",
      workspaceId: WORKSPACE,
      key: plaintext(n),
    });
    if (!verification.valid) throw new Error(`key ${n}: ${verification.code}`);
  }
};
// One key cached first, so that what every view shares (compiled code, interned values) is in the baseline.
await services.verification.verify({ requestId: "req_bench", source: "api", workspaceId: WORKSPACE, key: plaintext(0) });
gc();
gc();
const before = getHeapStatistics().used_heap_size;
await verifyAll();
gc();
gc();
const after = getHeapStatistics().used_heap_size;
const estimated = services.caches().find((sample) => sample.cache === "keys")?.bytes ?? 0;
console.log(
  `${count} cached keys: heap +${((after - before) / 1e6).toFixed(1)} MB, ${Math.round((after - before) / count)} bytes a cached key; ` +
    `the cache estimates ${Math.round(estimated / count)} bytes a key`,
);
