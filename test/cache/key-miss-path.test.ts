import { createHash } from "node:crypto";
import t from "tap";
import { validateConfig } from "../../src/config/load.js";
import { createServices } from "../../src/services.js";
import { createMemoryStores } from "../../src/storage/index.js";
import { ManualClock } from "../helpers/clock.js";
import { harness } from "../helpers/harness.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";

// A key not in the cache: concurrent misses of it share one read, an unknown key is remembered briefly, and a key
// created (or imported) right after a miss verifies at once, on every instance.

t.test("concurrent misses for one key share one read of the store", async (t) => {
  const config = validateConfig({ apis: [{ id: "api_misses", name: "misses", workspaceId: "ws_misses" }], analytics: { engine: "off" } });
  const stores = createMemoryStores();
  const reads: string[] = [];
  const findByHash = stores.keys.findByHash.bind(stores.keys);
  stores.keys.findByHash = (workspaceId, hash) => {
    reads.push(hash);
    return findByHash(workspaceId, hash);
  };
  const services = createServices(stores, config, new ManualClock());
  for (const api of config.apis) await services.apis.declare(api);
  const caller = services.rootKeys.operator("ws_misses");
  const { key } = await services.keys.createKey(caller, { apiId: "api_misses", byteLength: 16, enabled: true, recoverable: false });
  const verify = (plaintext: string) =>
    services.verification.verify({ requestId: "req_1", source: "api", workspaceId: "ws_misses", key: plaintext });
  const answers = await Promise.all(Array.from({ length: 20 }, () => verify(key)));
  t.same(new Set(answers.map((answer) => answer.code)), new Set(["VALID"]));
  t.equal(reads.length, 1, "twenty verifications, one read");
  const unknown = await Promise.all(Array.from({ length: 20 }, () => verify("sk_unknown")));
  t.same(new Set(unknown.map((answer) => answer.code)), new Set(["NOT_FOUND"]));
  t.equal(reads.length, 2, "an unknown key too: one read, then remembered as unknown");
  await verify("sk_unknown");
  t.equal(reads.length, 2, "asked again within the negative window: no read");
});

t.test("a key imported right after a miss verifies at once on another instance sharing Redis", async (t) => {
  const prefix = uniquePrefix(t, "miss-then-import");
  const config = {
    storage: { redis: { url: REDIS_URL, prefix } },
    apis: [{ id: "api_shared", name: "shared", workspaceId: "ws_test" }],
    migrations: [{ id: "imported", workspaceId: "ws_test", scheme: "sha256-hex" }],
  };
  const a = await harness(t, { storage: "redis", config });
  const b = await harness(t, { storage: "redis", config });
  const plaintexts = ["sk_imported_one", "sk_imported_two"];
  for (const key of plaintexts) t.equal((await a.call("keys.verifyKey", { key })).body.data.code, "NOT_FOUND", "unknown on a: remembered");
  const imported = await b.call("keys.migrateKeys", {
    migrationId: "imported",
    apiId: "api_shared",
    keys: plaintexts.map((key) => ({ hash: createHash("sha256").update(key).digest("hex") })),
  });
  t.equal(imported.status, 200);
  // The invalidation travels over Redis pub/sub: wait for it, not for the negative window (10 s) to pass.
  for (const key of plaintexts) {
    let code = "";
    for (let attempt = 0; attempt < 100 && code !== "VALID"; attempt++) {
      code = (await a.call("keys.verifyKey", { key })).body.data.code;
      if (code !== "VALID") await new Promise((resolve) => setTimeout(resolve, 20));
    }
    t.equal(code, "VALID", `${key} verifies on a`);
  }
});
