import { createHash } from "node:crypto";
import t from "tap";
import { validateConfig } from "../../src/config/load.js";
import { createServices } from "../../src/services.js";
import { createMemoryStores } from "../../src/storage/index.js";
import { ManualClock } from "../helpers/clock.js";

// Verification's key cache under cache.maxBytes: a stream of distinct keys never takes it over its share, and what
// it holds is the most recently verified keys.

const WORKSPACE = "ws_budget";
const API = "api_budget";
const MAX_BYTES = 1024 * 1024;

async function servicesWithKeys(count: number) {
  const config = validateConfig({
    cache: { maxBytes: MAX_BYTES },
    apis: [{ id: API, name: "budget", workspaceId: WORKSPACE }],
    migrations: [{ id: "budget", workspaceId: WORKSPACE, scheme: "sha256-hex" }],
    analytics: { engine: "off" },
  });
  const services = createServices(createMemoryStores(), config, new ManualClock());
  for (const api of config.apis) await services.apis.declare(api);
  const keys = Array.from({ length: count }, (_, n) => ({
    hash: createHash("sha256").update(plaintext(n)).digest("hex"),
    name: `customer ${n}`,
    meta: { plan: n % 2 === 0 ? "free" : "pro", customer: n },
    permissions: ["orders.read"],
    enabled: true,
  }));
  await services.keyMigrations.migrateKeys(services.rootKeys.operator(WORKSPACE), { migrationId: "budget", apiId: API, keys });
  const verify = (key: string) => services.verification.verify({ requestId: "req_budget", source: "api", workspaceId: WORKSPACE, key });
  const cache = (name: string) => services.caches().find((sample) => sample.cache === name);
  return { verify, cache };
}

function plaintext(n: number): string {
  return `budget_key_${n}`;
}

t.test("a stream of distinct keys keeps the key cache within its share of cache.maxBytes", async (t) => {
  const count = 8_000;
  const { verify, cache } = await servicesWithKeys(count);
  const share = Math.floor(MAX_BYTES * 0.7);
  let overBudget = 0;
  let invalid = 0;
  for (let n = 0; n < count; n++) {
    if ((await verify(plaintext(n))).code !== "VALID") invalid++;
    if ((cache("keys")?.bytes ?? 0) > share) overBudget++;
  }
  t.equal(invalid, 0, "every key verifies");
  for (let n = 0; n < 2_000; n++) await verify(`unknown_${n}`);
  const keys = cache("keys");
  t.equal(overBudget, 0, "never over its share");
  t.equal(keys?.maxBytes, share);
  t.ok((keys?.entries ?? 0) > 500 && (keys?.entries ?? 0) < count, `holds what fits: ${keys?.entries} keys in ${keys?.bytes} bytes`);
  t.equal((keys?.entries ?? 0) + (keys?.evictions ?? 0), count, "every key beyond that was evicted, least recently used first");
  const unknown = cache("unknown_keys");
  t.ok((unknown?.bytes ?? 0) <= Math.floor(MAX_BYTES * 0.1), "unknown keys within their own share");
  t.equal(cache("keys")?.entries, keys?.entries, "unknown keys pushed no known key out");
});

t.test("the most recently verified keys are the ones kept", async (t) => {
  const { verify, cache } = await servicesWithKeys(4_000);
  for (let n = 0; n < 4_000; n++) await verify(plaintext(n));
  const before = cache("keys");
  const kept = before?.entries ?? 0;
  // Verifying the newest again is answered from the cache: nothing is evicted.
  for (let n = 4_000 - Math.floor(kept / 2); n < 4_000; n++) await verify(plaintext(n));
  t.equal(cache("keys")?.evictions, before?.evictions, "the newest were all still cached");
  // The oldest had been evicted: each is loaded again and pushes one out.
  await verify(plaintext(0));
  t.equal(cache("keys")?.evictions, (before?.evictions ?? 0) + 1);
});
