import { createHash } from "node:crypto";
import t, { type Test } from "tap";
import { validateConfig } from "../../src/config/load.js";
import { hashKey } from "../../src/lib/hash.js";
import { createServices } from "../../src/services.js";
import type { CreditRecord, KeyRecord } from "../../src/storage/records.js";
import { decodeKeyRecord, encodeKeyRecord, hashBucket, recordBucket } from "../../src/storage/redis/key-record.js";
import { ManualClock } from "../helpers/clock.js";
import { keyRecord } from "../helpers/records.js";
import { openRedisStores, redisClient, uniquePrefix } from "../helpers/redis.js";

// How keys are kept in Redis: the compact form (a record in the bucket of its hash, its hash in the bucket of its
// id), and keys written in the earlier form (a JSON record and a hash → id key each) read, verified, changed and
// moved by the code of today, never lost. The names and buckets are a contract between versions sharing a Redis.

t.test("the buckets of a hash and of an id are pinned: every version must find a key where another put it", async (t) => {
  t.equal(recordBucket("U/HXG5oxjIG3MqPp0eFh8bAKSE+b7hk/3Q2vKmH4vf0="), "f77");
  t.equal(recordBucket("hash-key_1"), "3cf");
  t.equal(hashBucket("key_7JmhdttVJHqeKVvS"), "3725");
  t.equal(hashBucket("key_1"), "b4e8");
});

t.test("the compact form keeps every field of a record, and leaves out what its place says", async (t) => {
  const full: KeyRecord = keyRecord("key_full", {
    workspaceId: "ws_x",
    hash: "h",
    start: "",
    prefix: "sk",
    byteLength: 32,
    name: "full",
    identityId: "id_1",
    meta: { plan: "pro", n: [1, 2] },
    expires: 9,
    enabled: false,
    permissionIds: ["perm_1"],
    roleIds: ["role_1"],
    ratelimits: [{ id: "rl_1", name: "requests", limit: 10, durationMs: 1_000, autoApply: true }],
    encrypted: { kid: "k1", iv: "aXY=", tag: "dGFn", data: "ZGF0YQ==" },
    pendingMigrationId: "legacy",
    updatedAt: 8,
    deletedAt: 10,
  });
  t.same(decodeKeyRecord(encodeKeyRecord(full), "ws_x", "h"), full);
  const plain = keyRecord("key_plain", { workspaceId: "ws_x", hash: "h", start: "" });
  t.same(decodeKeyRecord(encodeKeyRecord(plain), "ws_x", "h"), plain);
  t.equal(encodeKeyRecord(plain), '["key_plain","api_1","ks_1",1]', "a plain key: its ids and creation time, nothing else");
  t.notMatch(encodeKeyRecord(full), /ws_x/, "not the workspace");
});

t.test("a key is written in the compact form under the names keys.ts builds, and in no other", async (t) => {
  const prefix = uniquePrefix(t, "key-form");
  const stores = await openRedisStores(t, prefix);
  const hash = hashKey("sk_compact_form");
  t.equal(await stores.keys.create(keyRecord("key_1", { hash }), null), true);
  const redis = await redisClient(t);
  t.same(
    (await redis.keys(`${prefix}:*`)).sort(),
    [`${prefix}:{ws_a}:api-keys:api_1`, `${prefix}:{ws_a}:ki:${hashBucket("key_1")}`, `${prefix}:{ws_a}:kh:${recordBucket(hash)}`].sort(),
  );
  t.equal(await redis.hget(`${prefix}:{ws_a}:ki:${hashBucket("key_1")}`, "key_1"), hash);
  t.equal(await redis.hget(`${prefix}:{ws_a}:kh:${recordBucket(hash)}`, hash), '["key_1","api_1","ks_1",1,{"t":"abcd"}]');
  t.equal(await redis.object("ENCODING", `${prefix}:{ws_a}:ki:${hashBucket("key_1")}`), "listpack", "the id bucket is a listpack");
});

/** Writes a key as keygate wrote keys before the compact form: a JSON record, a hash → id key, the listing. */
async function writeEarlier(t: Test, prefix: string, key: KeyRecord, credits?: CreditRecord) {
  const redis = await redisClient(t);
  const ws = `${prefix}:{${key.workspaceId}}`;
  await redis.set(`${ws}:key:${key.id}`, JSON.stringify(key));
  await redis.set(`${ws}:key-hash:${key.hash}`, key.id);
  if (key.deletedAt === undefined) await redis.zadd(`${ws}:api-keys:${key.apiId}`, 0, key.id);
  if (credits) await redis.set(`${ws}:key-credits:${key.id}`, JSON.stringify(credits));
  return redis;
}

t.test("keys in the earlier form are read, listed, changed (moved to the compact form on the way) and removed", async (t) => {
  const prefix = uniquePrefix(t, "earlier");
  const stores = await openRedisStores(t, prefix);
  const credits: CreditRecord = { remaining: 5, lastRefillAt: 1 };
  const older = keyRecord("key_1", { name: "older", meta: { plan: "free" }, hash: "hash-older" });
  const redis = await writeEarlier(t, prefix, older, credits);
  await writeEarlier(t, prefix, keyRecord("key_2", { hash: "hash-2" }));
  await stores.keys.create(keyRecord("key_3", { hash: "hash-3" }), null);

  t.same(await stores.keys.get("ws_a", "key_1"), older, "by id");
  t.same(await stores.keys.findByHash("ws_a", "hash-older"), older, "by hash");
  t.same(await stores.keys.getCredits("ws_a", "key_1"), credits);
  t.same(
    (await stores.keys.list("ws_a", "api_1", { limit: 10 })).items.map((key) => key.id),
    ["key_1", "key_2", "key_3"],
    "listed with the compact ones",
  );
  t.equal(await stores.keys.create(keyRecord("key_other", { hash: "hash-older" }), null), false, "its hash is taken");
  t.equal(await stores.keys.create(keyRecord("key_1", { hash: "hash-new" }), null), false, "its id is taken");

  const renamed = await stores.keys.update("ws_a", "key_1", (key) => ({ key: { ...key, name: "renamed" }, result: "done" }));
  t.equal(renamed, "done");
  t.same(await stores.keys.findByHash("ws_a", "hash-older"), { ...older, name: "renamed" });
  t.equal(await redis.exists(`${prefix}:{ws_a}:key:key_1`, `${prefix}:{ws_a}:key-hash:hash-older`), 0, "the earlier form is gone");
  t.ok(await redis.hget(`${prefix}:{ws_a}:kh:${recordBucket("hash-older")}`, "hash-older"), "written in the compact form");
  t.same(await stores.keys.getCredits("ws_a", "key_1"), credits, "its balance untouched");

  t.equal(await stores.keys.remove("ws_a", "key_2"), true, "an earlier key is removed");
  t.equal(await stores.keys.get("ws_a", "key_2"), null);
  t.equal(await stores.keys.findByHash("ws_a", "hash-2"), null);
  t.same(
    (await stores.keys.list("ws_a", "api_1", { limit: 10 })).items.map((key) => key.id),
    ["key_1", "key_3"],
  );
});

t.test("a pending imported key in the earlier form moves to its new hash, in the compact form", async (t) => {
  const prefix = uniquePrefix(t, "earlier-pending");
  const stores = await openRedisStores(t, prefix);
  const pending = keyRecord("key_1", { hash: "old-hash", start: "", pendingMigrationId: "legacy" });
  await writeEarlier(t, prefix, pending);
  const moved = await stores.keys.completeMigration("ws_a", "key_1", "legacy", "new-hash", "re_ab", 5);
  const { pendingMigrationId: _pending, ...settled } = pending;
  t.same(moved, { ...settled, hash: "new-hash", start: "re_ab", updatedAt: 5 });
  t.same(await stores.keys.findByHash("ws_a", "new-hash"), moved);
  t.equal(await stores.keys.findByHash("ws_a", "old-hash"), null, "the old hash finds nothing");
  t.same(await stores.keys.get("ws_a", "key_1"), moved);
});

t.test("keygate keys compact (upgradeStorage) moves every earlier key, stops nothing, and a second run finds none", async (t) => {
  const prefix = uniquePrefix(t, "upgrade");
  const stores = await openRedisStores(t, prefix);
  const keys = Array.from({ length: 250 }, (_, n) =>
    keyRecord(`key_${n}`, { hash: `hash-${n}`, workspaceId: n % 2 === 0 ? "ws_a" : "ws_b" }),
  );
  for (const key of keys) await writeEarlier(t, prefix, key);
  const seen: number[] = [];
  t.equal(await stores.keys.upgradeStorage((moved) => seen.push(moved)), 250);
  t.ok(seen.length > 0 && seen[seen.length - 1] === 250, "progress told along the way");
  const redis = await redisClient(t);
  t.same(await redis.keys(`${prefix}:*:key:*`), [], "no earlier record left");
  t.same(await redis.keys(`${prefix}:*:key-hash:*`), [], "no earlier hash index left");
  for (const key of keys) {
    if (!t.same(await stores.keys.findByHash(key.workspaceId, key.hash), key, `${key.id} reads the same`)) break;
  }
  t.equal(await stores.keys.upgradeStorage(), 0, "nothing left to move");
});

t.test("keys written in the earlier form verify with today's code, and keep verifying once changed", async (t) => {
  const prefix = uniquePrefix(t, "earlier-verify");
  const stores = await openRedisStores(t, prefix);
  const config = validateConfig({ apis: [{ id: "api_earlier", name: "earlier", workspaceId: "ws_a" }], analytics: { engine: "off" } });
  const services = createServices(stores, config, new ManualClock(), { windowsFollowClock: true });
  for (const api of config.apis) await services.apis.declare(api);
  const keySpaceId = (await stores.apis.get("ws_a", "api_earlier"))?.keySpaceId ?? "";
  const plaintext = "sk_written_before";
  const hash = createHash("sha256").update(plaintext).digest("base64");
  await writeEarlier(t, prefix, keyRecord("key_before", { hash, apiId: "api_earlier", keySpaceId, name: "before" }), {
    remaining: 2,
    lastRefillAt: 1,
  });
  const verify = () => services.verification.verify({ requestId: "req_1", source: "api", workspaceId: "ws_a", key: plaintext });
  const first = await verify();
  t.equal(first.code, "VALID");
  t.equal(first.key?.shown.name, "before");
  t.equal(first.valid && first.credits, 1, "its balance spent");
  await services.keys.updateKey(services.rootKeys.operator("ws_a"), { keyId: "key_before", name: "after" });
  const second = await verify();
  t.equal(second.code, "VALID", "verifies once moved");
  t.equal(second.key?.shown.name, "after");
  t.equal((await verify()).code, "USAGE_EXCEEDED", "the same balance, now empty");
});
