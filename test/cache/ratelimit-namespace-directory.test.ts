import t from "tap";
import { CachedNamespaceDirectory } from "../../src/cache/ratelimit-namespace-directory.js";
import { NAMESPACE_FRESH_MS } from "../../src/domain/ratelimit/namespace-directory.js";
import { createMemoryStores } from "../../src/storage/index.js";
import type { RatelimitNamespaceStore } from "../../src/storage/interfaces.js";
import { connectRedis } from "../../src/storage/redis/connection.js";
import { createRedisStores } from "../../src/storage/redis-stores.js";
import { StoreUnavailableError } from "../../src/storage/unavailable.js";
import { ManualClock } from "../helpers/clock.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";
import { privateRedis } from "../helpers/redis-server.js";
import { waitFor } from "../helpers/wait.js";

const override = (id: string, identifier: string, limit: number) => ({
  id,
  workspaceId: "ws_a",
  namespaceId: "rlns_1",
  identifier,
  limit,
  durationMs: 1_000,
  createdAt: 0,
});

/** Counts how often the directory reads whole override lists, passing every call on to the real store. */
function countingAllOverrides(store: RatelimitNamespaceStore): { store: RatelimitNamespaceStore; loads: () => number } {
  let loads = 0;
  const counting = Object.create(store) as RatelimitNamespaceStore;
  counting.allOverrides = (workspaceId, namespaceId) => {
    loads++;
    return store.allOverrides(workspaceId, namespaceId);
  };
  return { store: counting, loads: () => loads };
}

for (const kind of ["memory", "redis"] as const) {
  t.test(`namespace directory over ${kind} stores`, async (t) => {
    const open = async () => {
      if (kind === "memory") return createMemoryStores().ratelimitNamespaces;
      const redis = await connectRedis({ url: REDIS_URL, commandTimeoutMs: 2_000, connectTimeoutMs: 2_000 });
      const stores = createRedisStores(redis, uniquePrefix(t, "directory"), true);
      t.teardown(() => stores.close());
      return stores.ratelimitNamespaces;
    };

    await t.test("finds a namespace by id or by name, and an id-shaped name by name", async (t) => {
      const store = await open();
      const directory = new CachedNamespaceDirectory(store, new ManualClock());
      await store.createNamespace({ id: "rlns_1", workspaceId: "ws_a", name: "emails", createdAt: 0 });
      await store.createNamespace({ id: "rlns_2", workspaceId: "ws_a", name: "rlns_lookalike", createdAt: 0 });
      t.equal((await directory.find("ws_a", "rlns_1"))?.namespace.name, "emails");
      t.equal((await directory.find("ws_a", "emails"))?.namespace.id, "rlns_1");
      t.equal((await directory.find("ws_a", "rlns_lookalike"))?.namespace.id, "rlns_2");
      t.equal(await directory.find("ws_b", "emails"), null, "another workspace's namespace is unknown");
    });

    await t.test("unknown names are not cached: a namespace created elsewhere is found at once", async (t) => {
      const store = await open();
      const directory = new CachedNamespaceDirectory(store, new ManualClock());
      t.equal(await directory.find("ws_a", "late"), null);
      await store.createNamespace({ id: "rlns_1", workspaceId: "ws_a", name: "late", createdAt: 0 });
      t.equal((await directory.find("ws_a", "late"))?.namespace.id, "rlns_1");
    });

    await t.test(
      `overrides changed elsewhere apply after at most ${NAMESPACE_FRESH_MS} ms, and are reloaded only when they changed`,
      async (t) => {
        const counted = countingAllOverrides(await open());
        const clock = new ManualClock();
        const directory = new CachedNamespaceDirectory(counted.store, clock);
        await counted.store.createNamespace({ id: "rlns_1", workspaceId: "ws_a", name: "emails", createdAt: 0 });
        await counted.store.setOverride(override("rlor_1", "alice", 5));
        t.equal((await directory.find("ws_a", "emails"))?.overrides.match("alice")?.limit, 5);
        t.equal(counted.loads(), 1);

        clock.advance(NAMESPACE_FRESH_MS);
        await directory.find("ws_a", "emails");
        t.equal(counted.loads(), 1, "revalidated by its version token, no reload");

        await counted.store.setOverride(override("rlor_x", "alice", 9));
        t.equal(
          (await directory.find("ws_a", "emails"))?.overrides.match("alice")?.limit,
          5,
          "within the fresh window the cached overrides serve",
        );
        clock.advance(NAMESPACE_FRESH_MS);
        t.equal((await directory.find("ws_a", "emails"))?.overrides.match("alice")?.limit, 9, "then the change applies");
        t.equal(counted.loads(), 2);

        await counted.store.deleteOverride("ws_a", "rlns_1", "alice");
        await counted.store.markNamespaceDeleted("ws_a", "rlns_1", 1);
        clock.advance(NAMESPACE_FRESH_MS);
        const after = await directory.find("ws_a", "rlns_1");
        t.equal(after?.overrides.match("alice"), undefined, "a deleted override no longer applies");
        t.equal(after?.namespace.deletedAt, 1, "nor is a deletion missed");
      },
    );

    await t.test("forget drops what this instance knows at once", async (t) => {
      const store = await open();
      const directory = new CachedNamespaceDirectory(store, new ManualClock());
      await store.createNamespace({ id: "rlns_1", workspaceId: "ws_a", name: "emails", createdAt: 0 });
      await directory.find("ws_a", "emails");
      await store.setOverride(override("rlor_1", "alice", 5));
      directory.forget("ws_a", "rlns_1", "emails");
      t.equal((await directory.find("ws_a", "emails"))?.overrides.match("alice")?.limit, 5);
    });
  });
}

t.test("while Redis is down the last known namespace and overrides keep serving; unknown ones fail as unavailable", async (t) => {
  const server = await privateRedis(t);
  const redis = await connectRedis({ url: server.url, commandTimeoutMs: 200, connectTimeoutMs: 2_000 });
  const clock = new ManualClock();
  const stores = createRedisStores(redis, "kgtest:directory-down", true, { clock });
  t.teardown(() => stores.close());
  const directory = new CachedNamespaceDirectory(stores.ratelimitNamespaces, clock);
  await stores.ratelimitNamespaces.createNamespace({ id: "rlns_1", workspaceId: "ws_a", name: "emails", createdAt: 0 });
  await stores.ratelimitNamespaces.setOverride(override("rlor_1", "alice", 5));
  await directory.find("ws_a", "emails");

  await server.stop();
  clock.advance(60 * 60 * 1_000 + 1);
  t.equal((await directory.find("ws_a", "emails"))?.overrides.match("alice")?.limit, 5, "past both fresh windows: the stale answer");
  await t.rejects(directory.find("ws_a", "never-seen"), StoreUnavailableError);
});

t.test("a name whose namespace vanished from the store (Redis lost its data) is looked up afresh", async (t) => {
  const server = await privateRedis(t);
  const redis = await connectRedis({ url: server.url, commandTimeoutMs: 500, connectTimeoutMs: 2_000 });
  const clock = new ManualClock();
  const stores = createRedisStores(redis, "kgtest:directory-lost", true, { clock });
  t.teardown(() => stores.close());
  const directory = new CachedNamespaceDirectory(stores.ratelimitNamespaces, clock);
  await stores.ratelimitNamespaces.createNamespace({ id: "rlns_before", workspaceId: "ws_a", name: "emails", createdAt: 0 });
  t.equal((await directory.find("ws_a", "emails"))?.namespace.id, "rlns_before");

  await redis.flushdb(); // this test's own server
  clock.advance(NAMESPACE_FRESH_MS);
  t.equal(await directory.find("ws_a", "emails"), null, "gone is gone");
  await stores.ratelimitNamespaces.createNamespace({ id: "rlns_after", workspaceId: "ws_a", name: "emails", createdAt: 0 });
  t.equal(
    (await directory.find("ws_a", "emails"))?.namespace.id,
    "rlns_after",
    "the name's new id, although the old mapping was fresh for an hour",
  );
});

t.test(
  "after revalidateAll (the breaker closed), a Redis that fails again leaves the last known namespace serving; one that answers is asked afresh",
  async (t) => {
    const server = await privateRedis(t);
    const redis = await connectRedis({ url: server.url, commandTimeoutMs: 200, connectTimeoutMs: 2_000 });
    const clock = new ManualClock();
    const stores = createRedisStores(redis, "kgtest:directory-revalidate", true, { clock });
    t.teardown(() => stores.close());
    const directory = new CachedNamespaceDirectory(stores.ratelimitNamespaces, clock);
    await stores.ratelimitNamespaces.createNamespace({ id: "rlns_1", workspaceId: "ws_a", name: "emails", createdAt: 0 });
    await stores.ratelimitNamespaces.setOverride(override("rlor_1", "alice", 5));
    await directory.find("ws_a", "emails");

    directory.revalidateAll();
    await server.stop();
    t.equal((await directory.find("ws_a", "emails"))?.overrides.match("alice")?.limit, 5, "the store cannot answer: what was known");

    await server.start(); // empty: it lost its data
    directory.revalidateAll();
    const found = await waitFor("the directory finds nothing in the restarted, empty store", 10_000, async (because) => {
      const namespace = await directory.find("ws_a", "emails");
      if (namespace !== null) because(`it still answers ${namespace.namespace.id}`);
      return namespace === null ? null : undefined;
    });
    t.equal(found, null, "the store answers again: what it says (nothing) wins over what was known");
  },
);
