import t from "tap";
import { openRedisStores, redisClient, uniquePrefix } from "../helpers/redis.js";
import { storeContract } from "./contract.js";

// The record stores on a single Redis: the store contract, the keys they write, and their scripts after SCRIPT FLUSH.

t.test("Redis stores meet the store contract", (t) => storeContract(t, (t) => openRedisStores(t, uniquePrefix(t, "contract"))));

t.test("every key a workspace's records use carries the workspace as its hash tag", async (t) => {
  const prefix = uniquePrefix(t, "tags");
  const stores = await openRedisStores(t, prefix);
  await stores.apis.create({
    id: "api_tagged",
    workspaceId: "ws_tagged",
    name: "tagged",
    keySpaceId: "ks_1",
    createdAt: 1,
    deleteProtection: false,
  });
  const inspect = await redisClient(t);
  const keys = await inspect.keys(`${prefix}:*`);
  t.ok(keys.length >= 2);
  for (const key of keys) t.match(key, new RegExp(`^${prefix}:\\{(ws_tagged|apis)\\}:`), `${key} has a hash tag`);
});

t.test("writes still work after Redis forgets its scripts (SCRIPT FLUSH)", async (t) => {
  const stores = await openRedisStores(t, uniquePrefix(t, "noscript"));
  await stores.apis.create({
    id: "api_before",
    workspaceId: "ws_a",
    name: "before",
    keySpaceId: "ks_1",
    createdAt: 1,
    deleteProtection: false,
  });
  const inspect = await redisClient(t);
  await inspect.script("FLUSH");
  t.equal(
    await stores.apis.create({
      id: "api_after",
      workspaceId: "ws_a",
      name: "after",
      keySpaceId: "ks_2",
      createdAt: 1,
      deleteProtection: false,
    }),
    true,
  );
  t.equal((await stores.apis.get("ws_a", "api_after"))?.name, "after");
});

t.test("an analytics quota window expires in Redis after its window", async (t) => {
  const prefix = uniquePrefix(t, "quota");
  const stores = await openRedisStores(t, prefix);
  const windowStart = Date.now();
  await stores.analyticsQuota.acquire("ws_q", windowStart, 5_000, { queries: 10, executionMs: 10_000 });
  const inspect = await redisClient(t);
  const [key] = await inspect.keys(`${prefix}:*`);
  t.equal(key, `${prefix}:{ws_q}:analytics-quota:${windowStart}`, "built by keys.ts, with the workspace as hash tag");
  const ttl = await inspect.pttl(key as string);
  t.ok(ttl > 0 && ttl <= 5_000 + 60_000, `expires with the window (pttl ${ttl})`);
});

t.test("a dashboard session is one key that Redis expires by itself, and a touch sets its time to live again", async (t) => {
  const prefix = uniquePrefix(t, "sessions");
  const stores = await openRedisStores(t, prefix);
  const session = { id: "hash_1", rootKeyHash: "rk", workspaceId: "ws_a", csrfToken: "c", createdAt: 1, lastSeenAt: 1 };
  await stores.dashboardSessions.create(session, 60_000);
  const inspect = await redisClient(t);
  const keys = await inspect.keys(`${prefix}:*`);
  t.same(keys, [`${prefix}:{dashboard-session:hash_1}`]);
  const first = await inspect.pttl(keys[0] as string);
  t.ok(first > 0 && first <= 60_000, `time to live ${first} ms`);
  await stores.dashboardSessions.touch(session.id, 2, 3_600_000);
  const touched = await inspect.pttl(keys[0] as string);
  t.ok(touched > 60_000 && touched <= 3_600_000, `time to live ${touched} ms after the touch`);
});

t.test("APIs created before the per-workspace index are listed, found once by a scan", async (t) => {
  const prefix = uniquePrefix(t, "earlier-apis");
  const stores = await openRedisStores(t, prefix);
  const inspect = await redisClient(t);
  const record = (id: string) => ({ id, workspaceId: "ws_old", name: id, keySpaceId: `ks_${id}`, createdAt: 1, deleteProtection: false });
  // As an earlier keygate wrote an API: the record and its lookups, no per-workspace id index.
  for (const id of ["api_old_1", "api_old_2"]) {
    await inspect.set(`${prefix}:{ws_old}:api:${id}`, JSON.stringify(record(id)));
    await inspect.set(`${prefix}:{apis}:ws:${id}`, "ws_old");
  }
  await stores.apis.create(record("api_new"));
  t.same(
    (await stores.apis.list("ws_old")).map((api) => api.id),
    ["api_new", "api_old_1", "api_old_2"],
  );
  t.equal(await inspect.exists(`${prefix}:{ws_old}:api-ids-whole`), 1, "the index is marked whole");
  const reopened = await openRedisStores(t, prefix);
  t.same(
    (await reopened.apis.list("ws_old")).map((api) => api.id),
    ["api_new", "api_old_1", "api_old_2"],
    "another instance reads the index",
  );
});
