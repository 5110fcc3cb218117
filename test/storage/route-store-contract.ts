import type { Test } from "tap";
import type { Stores } from "../../src/storage/interfaces.js";
import type { RouteStore, StoredRouteTable } from "../../src/storage/route-interfaces.js";
import type { RouteRecord } from "../../src/storage/route-records.js";

/** A stored route with only the fields every route has; `fields` add or override any of it. */
function route(id: string, fields: Partial<RouteRecord> = {}): RouteRecord {
  return {
    id,
    workspaceId: "ws_a",
    name: `name-${id}`,
    match: { prefix: `/${id}` },
    upstream: "http://127.0.0.1:9",
    policies: [],
    createdAt: 1_000,
    updatedAt: 1_000,
    ...fields,
  };
}

/** A route with every optional field set, its policies of every kind, each with optional fields of its own. */
function fullRoute(id: string): RouteRecord {
  return route(id, {
    match: { prefix: `/${id}`, methods: ["GET", "POST"] },
    policies: [
      {
        id: "pol_fw",
        name: "block admin",
        enabled: true,
        match: [{ path: { path: { prefix: "/admin", ignoreCase: true } } }, { method: { methods: ["DELETE"] } }],
        firewall: { action: "ACTION_DENY", ipAllow: ["10.0.0.0/8"] },
      },
      {
        id: "pol_auth",
        name: "auth",
        enabled: true,
        keyauth: {
          keyspaces: ["api_1", "ks_2"],
          locations: [{ header: { name: "x-key", scheme: "Token" } }, { queryParam: { name: "key" } }, { bearer: {} }],
          permissionQuery: "orders.read AND (orders.write OR admin)",
          ratelimits: [{ name: "requests", limit: 10, duration: 60_000, cost: 2 }],
          credits: 0,
        },
      },
      {
        id: "pol_rl",
        name: "per tenant",
        enabled: false,
        ratelimit: { limit: 5, windowMs: 1_000, identifiers: [{ remoteIp: {} }, { header: { name: "x-tenant" } }] },
      },
      { id: "pol_oa", name: "schema", enabled: true, openapi: {} },
      { id: "pol_log", name: "log", enabled: true, logging: { requestHeaders: true, query: false } },
    ],
    forward: { principal: "x-principal", keyId: "x-key-id" },
    timeoutMs: 2_500,
    openApi: { uploadedAt: 3_000, title: "Orders" },
    updatedAt: 2_000,
  });
}

/** A route whose upstream is a pool with every optional field set, and one with only its targets. */
function pooledRoutes(): RouteRecord[] {
  return [
    route("rt_pool", {
      match: { prefix: "/pool" },
      upstream: {
        targets: [{ url: "http://10.0.0.1:8080/api", weight: 3 }, { url: "http://10.0.0.2:8080/api" }],
        balance: "least-connections",
        health: {
          passive: { failures: 3, cooldownMs: 10_000, on5xx: true },
          active: {
            path: "/health",
            intervalMs: 5_000,
            timeoutMs: 1_000,
            healthyThreshold: 2,
            unhealthyThreshold: 3,
            statuses: [200, 204],
          },
        },
        retry: { statuses: [502, 503], attempts: 2 },
        tls: { ca: "/etc/ca.pem", cert: "/etc/client.pem", key: "/etc/client.key", servername: "api.internal", rejectUnauthorized: true },
      },
    }),
    route("rt_pool_bare", { match: { prefix: "/pool-bare" }, upstream: { targets: [{ url: "http://10.0.0.3" }] } }),
  ];
}

/** The keys a route holds, sorted: an optional field left out is absent, not present as undefined. */
function keysOf(record: object): string[] {
  return Object.keys(record).sort();
}

/**
 * The RouteStore part of the store contract (see contract.ts): one table every instance reads, written whole by
 * `update` with a version that grows by one per write, OpenAPI documents kept beside it.
 */
export async function routeStoreContract(t: Test, open: (t: Test) => Promise<Stores>): Promise<void> {
  /** Both ways of reading the version, which must agree. */
  const versionOf = async (t: Test, store: RouteStore): Promise<number> => {
    const table = await store.table();
    t.equal(await store.version(), table.version, "version() agrees with table().version");
    return table.version;
  };

  await t.test("routes: an empty table is version 0 with no routes and no documents", async (t) => {
    const { routes } = await open(t);
    t.strictSame(await routes.table(), { version: 0, routes: [] });
    t.equal(await routes.version(), 0);
    t.equal(await routes.openApi("rt_none"), null);
  });

  await t.test("routes: update writes the routes, bumps the version by one and returns the change's result", async (t) => {
    const { routes } = await open(t);
    const seen: StoredRouteTable[] = [];
    const first = await routes.update((current) => {
      seen.push(current);
      return { result: "first", routes: [...current.routes, route("rt_1")] };
    });
    t.equal(first, "first");
    t.equal(await versionOf(t, routes), 1);
    t.strictSame((await routes.table()).routes, [route("rt_1")]);
    const second = await routes.update((current) => {
      seen.push(current);
      return { result: { version: current.version + 1 }, routes: [...current.routes, route("rt_2")] };
    });
    t.strictSame(second, { version: 2 }, "any result, as given");
    t.strictSame(seen, [
      { version: 0, routes: [] },
      { version: 1, routes: [route("rt_1")] },
    ]);
    t.strictSame(await routes.table(), { version: 2, routes: [route("rt_1"), route("rt_2")] }, "in the order written");
    t.equal(await versionOf(t, routes), 2);
    await routes.update((current) => ({ result: undefined, routes: current.routes.filter((each) => each.id !== "rt_1") }));
    t.strictSame(await routes.table(), { version: 3, routes: [route("rt_2")] }, "a removal is a write like any other");
    await routes.update(() => ({ result: undefined, routes: [] }));
    t.strictSame(await routes.table(), { version: 4, routes: [] }, "an emptied table keeps counting");
    t.equal(await versionOf(t, routes), 4);
  });

  await t.test("routes: a change without routes writes nothing, its document neither, and the version stays", async (t) => {
    const { routes } = await open(t);
    await routes.update(() => ({ result: undefined, routes: [route("rt_1")] }));
    const result = await routes.update((current) => ({ result: current.version, openApi: { routeId: "rt_1", text: "{}" } }));
    t.equal(result, 1, "the result is returned all the same");
    t.strictSame(await routes.table(), { version: 1, routes: [route("rt_1")] });
    t.equal(await versionOf(t, routes), 1);
    t.equal(await routes.openApi("rt_1"), null, "the document given without routes is not stored");
  });

  await t.test("routes: a change that throws writes nothing, and the error reaches the caller", async (t) => {
    const { routes } = await open(t);
    await routes.update(() => ({ result: undefined, routes: [route("rt_1")] }));
    await t.rejects(
      routes.update(() => {
        throw new Error("clash");
      }),
      { message: "clash" },
    );
    t.strictSame(await routes.table(), { version: 1, routes: [route("rt_1")] });
    t.equal(await versionOf(t, routes), 1);
  });

  await t.test("routes: records read back equal what was written, optional fields absent rather than undefined", async (t) => {
    const { routes } = await open(t);
    const full = fullRoute("rt_full");
    const bare = route("rt_bare");
    await routes.update(() => ({ result: undefined, routes: [full, bare] }));
    const [readFull, readBare] = (await routes.table()).routes;
    t.strictSame(readFull, full, "every field of every policy kind");
    t.strictSame(readBare, bare);
    t.strictSame(keysOf(readBare as RouteRecord), ["createdAt", "id", "match", "name", "policies", "updatedAt", "upstream", "workspaceId"]);
    t.strictSame(keysOf((readBare as RouteRecord).match), ["prefix"], "a match without methods has no methods field");
    t.strictSame(
      keysOf((readFull as RouteRecord).policies[3] ?? {}),
      ["enabled", "id", "name", "openapi"],
      "a policy without match has none",
    );
    let inChange: RouteRecord | undefined;
    await routes.update((current) => {
      inChange = current.routes[0];
      return { result: undefined };
    });
    t.strictSame(inChange, full, "the table a change is given reads the same");
  });

  await t.test("routes: a pool upstream reads back as written, optional fields absent rather than undefined", async (t) => {
    const { routes } = await open(t);
    const pooled = pooledRoutes();
    await routes.update(() => ({ result: undefined, routes: pooled }));
    const read = (await routes.table()).routes;
    t.strictSame(read, pooled);
    const bare = (read[1] as RouteRecord).upstream as { targets: object[] };
    t.strictSame(keysOf(bare), ["targets"], "a pool of targets alone has no other field");
    t.strictSame(keysOf(bare.targets[0] ?? {}), ["url"], "a target without weight has none");
  });

  await t.test("routes: records returned are copies", async (t) => {
    const { routes } = await open(t);
    const empty = await routes.table();
    empty.routes.push(route("rt_stray"));
    empty.version = 7;
    t.strictSame(await routes.table(), { version: 0, routes: [] }, "changing an empty table read does not change the store");
    await routes.update(() => ({ result: undefined, routes: [route("rt_1")] }));
    const read = await routes.table();
    (read.routes[0] as RouteRecord).policies.push({ id: "pol_x", name: "x", enabled: true, logging: {} });
    read.routes.push(route("rt_stray"));
    await routes.update((current) => {
      current.routes.push(route("rt_stray"));
      return { result: undefined };
    });
    t.strictSame(await routes.table(), { version: 1, routes: [route("rt_1")] }, "nor does changing a table read or given, unless written");
    const written = [route("rt_2")];
    await routes.update(() => ({ result: undefined, routes: written }));
    (written[0] as RouteRecord).name = "changed after the write";
    t.equal((await routes.table()).routes[0]?.name, "name-rt_2", "nor changing the records after they were written");
  });

  await t.test("routes: OpenAPI documents are set, replaced and removed with a write of the table", async (t) => {
    const { routes } = await open(t);
    const document = (title: string) => JSON.stringify({ openapi: "3.1.0", info: { title, version: "1" }, paths: {} });
    await routes.update(() => ({ result: undefined, routes: [route("rt_1"), route("rt_2")] }));
    t.equal(await routes.openApi("rt_1"), null, "none before one is set");
    await routes.update((current) => ({ result: undefined, routes: current.routes, openApi: { routeId: "rt_1", text: document("one") } }));
    t.equal(await routes.openApi("rt_1"), document("one"), "set, and read back exactly");
    t.equal(await routes.openApi("rt_2"), null, "another route's is not");
    t.equal(await versionOf(t, routes), 2, "setting a document is a write of the table");
    await routes.update((current) => ({ result: undefined, routes: current.routes, openApi: { routeId: "rt_2", text: document("two") } }));
    await routes.update((current) => ({ result: undefined, routes: current.routes, openApi: { routeId: "rt_1", text: document("uno") } }));
    t.equal(await routes.openApi("rt_1"), document("uno"), "replaced");
    t.equal(await routes.openApi("rt_2"), document("two"), "each route's kept apart");
    await routes.update((current) => ({ result: undefined, routes: current.routes, openApi: { routeId: "rt_1", text: null } }));
    t.equal(await routes.openApi("rt_1"), null, "removed by null");
    t.equal(await routes.openApi("rt_2"), document("two"), "the other stays");
    t.equal(await versionOf(t, routes), 5);
    const large = JSON.stringify({ openapi: "3.1.0", info: { title: "é ✓ 🚀", version: "1" }, paths: {}, pad: "x".repeat(200_000) });
    await routes.update((current) => ({ result: undefined, routes: current.routes, openApi: { routeId: "rt_1", text: large } }));
    t.equal(await routes.openApi("rt_1"), large, "a large document, in any characters, read back exactly");
  });

  await t.test("routes: a route's OpenAPI document goes when the route is removed, and only its", async (t) => {
    const { routes } = await open(t);
    await routes.update(() => ({ result: undefined, routes: [route("rt_1"), route("rt_2")], openApi: { routeId: "rt_1", text: "one" } }));
    await routes.update((current) => ({ result: undefined, routes: current.routes, openApi: { routeId: "rt_2", text: "two" } }));
    await routes.update((current) => ({ result: undefined, routes: current.routes.filter((each) => each.id !== "rt_1") }));
    t.equal(await routes.openApi("rt_1"), null, "the removed route's document is gone");
    t.equal(await routes.openApi("rt_2"), "two", "the remaining route keeps its own");
    await routes.update((current) => ({ result: undefined, routes: [...current.routes, route("rt_1")] }));
    t.equal(await routes.openApi("rt_1"), null, "a route of the same id added again does not get the old document back");
  });

  await t.test("routes: concurrent updates from several callers all land, each seeing the others' writes", async (t) => {
    const { routes } = await open(t);
    const callers = 20;
    const results = await Promise.all(
      Array.from({ length: callers }, (_, i) =>
        routes.update((current) => ({ result: current.version + 1, routes: [...current.routes, route(`rt_${i}`)] })),
      ),
    );
    const table = await routes.table();
    t.equal(table.version, callers, "one version per write");
    t.equal(await versionOf(t, routes), callers);
    t.strictSame(
      table.routes.map((each) => each.id).sort(),
      Array.from({ length: callers }, (_, i) => `rt_${i}`).sort(),
      "none lost, none twice",
    );
    t.strictSame(
      [...results].sort((a, b) => a - b),
      Array.from({ length: callers }, (_, i) => i + 1),
      "each caller's result comes from the table its write replaced: every version once",
    );
  });
}
