import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { ROUTE_VERSION_CHECK_MS } from "../../src/gateway/route-sync.js";
import type { RouteRecord } from "../../src/storage/route-records.js";
import { createKey } from "../helpers/fixtures.js";
import { type CallResult, type Harness, harness, WORKSPACE } from "../helpers/harness.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";
import { startUpstream, type Upstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

// Routes written through the API of one instance are taken up by another on the same Redis: announced on the
// invalidation bus, and found by the version check when an announcement is missed. Each instance serves a request
// with one route table, never part of a change.

/** Long enough for a loaded machine; the waits end as soon as the change shows. */
const BOUND_MS = 15_000;

interface Instance {
  h: Harness;
  /** A GET through this instance's gateway, over real HTTP. */
  send(path: string, headers?: Record<string, string>): Promise<CallResult>;
}

/** keygate on the test's Redis under `prefix`, listening on a port of its own. */
async function instance(t: Test, prefix: string): Promise<Instance> {
  const h = await harness(t, { storage: "redis", config: { storage: { redis: { url: REDIS_URL, prefix } } } });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  return {
    h,
    async send(path, headers = {}) {
      const response = await fetch(`${base}${path}`, { headers });
      const text = await response.text();
      return {
        status: response.status,
        headers: Object.fromEntries(response.headers),
        body: text.startsWith("{") ? JSON.parse(text) : text,
      };
    },
  };
}

interface Pair {
  a: Instance;
  b: Instance;
  upstream: Upstream;
  apiId: string;
  bearer: Record<string, string>;
}

/** Two instances on one Redis prefix, an upstream, and an API with a key, created through /v2 on A. */
async function pair(t: Test): Promise<Pair> {
  const upstream = await startUpstream(t);
  const prefix = uniquePrefix(t, "propagation");
  const a = await instance(t, prefix);
  const b = await instance(t, prefix);
  const created = await a.h.call("apis.createApi", { name: "orders" });
  t.equal(created.status, 200, "the API is created on A");
  const apiId = created.body.data.apiId as string;
  const { key } = await createKey(a.h, apiId);
  return { a, b, upstream, apiId, bearer: { authorization: `Bearer ${key}` } };
}

/** Waits until `instance` answers `path` with `status` (with the key), and returns that answer. */
function servedWith(instance: Instance, path: string, headers: Record<string, string>, status: number, what: string): Promise<CallResult> {
  return waitFor(what, BOUND_MS, async (because) => {
    const answer = await instance.send(path, headers);
    because(`${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`);
    return answer.status === status ? answer : undefined;
  });
}

t.test("a route created, changed and deleted on A is served, changed and gone on B", async (t) => {
  const s = await pair(t);
  const auth = { name: "auth", enabled: true, keyauth: { keyspaces: [s.apiId] } };
  t.equal((await s.b.send("/orders/1", s.bearer)).status, 404, "B takes nothing under /orders before");

  const created = await s.a.h.call("keygate.createRoute", {
    name: "orders",
    match: { prefix: "/orders" },
    upstream: s.upstream.url,
    policies: [auth],
  });
  t.equal(created.status, 200, created.status === 200 ? "created on A" : JSON.stringify(created.body));
  t.equal((await s.a.send("/orders/1", s.bearer)).status, 200, "A serves the route once its procedure has answered");
  const served = await servedWith(s.b, "/orders/1", s.bearer, 200, "B serves the route created on A");
  t.equal(served.body.url, "/orders/1", "forwarded to the upstream");
  t.equal((await s.b.send("/orders/1")).status, 401, "with its keyauth policy: no key, no entry");

  const firewall = {
    name: "no admin",
    enabled: true,
    match: [{ path: { path: { prefix: "/orders/admin" } } }],
    firewall: { action: "ACTION_DENY" },
  };
  const changed = await s.a.h.call("keygate.setRoutePolicies", { route: "orders", policies: [firewall, auth] });
  t.equal(changed.status, 200, changed.status === 200 ? "policies changed on A" : JSON.stringify(changed.body));
  const denied = await servedWith(s.b, "/orders/admin/users", s.bearer, 403, "B applies the firewall added on A");
  t.match(denied.body.error.detail, /'no admin'/, "denied by the new policy");
  t.equal((await s.b.send("/orders/1", s.bearer)).status, 200, "what the firewall does not match still passes");

  t.equal((await s.a.h.call("keygate.deleteRoute", { route: "orders" })).status, 200, "deleted on A");
  const gone = await servedWith(s.b, "/orders/1", s.bearer, 404, "B no longer takes the route deleted on A");
  t.ok(gone.body.error, "answered by keygate itself, in the error envelope, not by the upstream");
  t.equal(s.b.h.app.gatewaySnapshot.current.stored.version, 3, "B is at the table's version: created, changed, deleted");
});

t.test("under load while A flips a route's policies, each of B's answers is one version of the route, entirely", async (t) => {
  const s = await pair(t);
  const flips = 20;
  const loaders = 4;
  // Each version denies one path and limits the rest under a limit of its own, which the answer's headers show: a
  // table mixing the two versions would deny /flip/x and limit /flip/y at 999002 (or the reverse), answers
  // neither version gives. A firewall denial names its policy.
  const auth = { name: "auth", enabled: true, keyauth: { keyspaces: [s.apiId] } };
  const version = (n: 1 | 2) => {
    const denied = n === 1 ? "x" : "y";
    return [
      {
        name: `v${n} deny ${denied}`,
        enabled: true,
        match: [{ path: { path: { prefix: `/flip/${denied}` } } }],
        firewall: { action: "ACTION_DENY" },
      },
      auth,
      { name: `v${n} limit`, enabled: true, ratelimit: { limit: 999_000 + n, windowMs: 60_000, identifiers: [{ remoteIp: {} }] } },
    ];
  };
  /** Which version gives this answer to `path`, or what is wrong with it. */
  const versionGiving = (path: "x" | "y", answer: CallResult): 1 | 2 | string => {
    const limit = answer.headers["x-ratelimit-limit"];
    const detail = answer.body?.error?.detail as string | undefined;
    const deniedBy = (n: 1 | 2) => answer.status === 403 && detail?.includes(`'v${n} deny ${path}'`) === true;
    const limitedBy = (n: 1 | 2) => answer.status === 200 && limit === String(999_000 + n);
    if (path === "x" ? deniedBy(1) : limitedBy(1)) return 1;
    if (path === "x" ? limitedBy(2) : deniedBy(2)) return 2;
    return `/flip/${path}: ${answer.status}, x-ratelimit-limit ${limit}, ${detail ?? "no error"}`;
  };

  const created = await s.a.h.call("keygate.createRoute", {
    name: "flip",
    match: { prefix: "/flip" },
    upstream: s.upstream.url,
    policies: version(1),
  });
  t.equal(created.status, 200, created.status === 200 ? "created on A" : JSON.stringify(created.body));
  await servedWith(s.b, "/flip/x", s.bearer, 403, "B serves version 1");

  const seen: { path: "x" | "y"; version: 1 | 2 | string }[] = [];
  let loading = true;
  const load = async (first: "x" | "y") => {
    for (let path = first; loading; path = path === "x" ? "y" : "x") {
      seen.push({ path, version: versionGiving(path, await s.b.send(`/flip/${path}/item`, s.bearer)) });
    }
  };
  const loops = Array.from({ length: loaders }, (_, i) => load(i % 2 === 0 ? "x" : "y"));
  try {
    for (let flip = 1; flip <= flips; flip++) {
      const next: 1 | 2 = flip % 2 === 1 ? 2 : 1;
      const from = seen.length;
      const set = await s.a.h.call("keygate.setRoutePolicies", { route: "flip", policies: version(next) });
      if (set.status !== 200) throw new Error(`flip ${flip}: ${set.status} ${JSON.stringify(set.body)}`);
      // The flip is done once B's load has seen the new version on both paths.
      await waitFor(`B's answers show version ${next} (flip ${flip})`, BOUND_MS, () => {
        const since = seen.slice(from);
        return (["x", "y"] as const).every((path) => since.some((answer) => answer.path === path && answer.version === next))
          ? true
          : undefined;
      });
    }
  } finally {
    loading = false;
    await Promise.all(loops);
  }
  const wrong = seen.filter((answer) => typeof answer.version === "string").map((answer) => answer.version);
  t.strictSame(wrong, [], `each of ${seen.length} answers during ${flips} flips matches version 1 or version 2 entirely`);
  const counts = (n: 1 | 2) => seen.filter((answer) => answer.version === n).length;
  t.ok(counts(1) > 0 && counts(2) > 0, `both versions answered (${counts(1)} and ${counts(2)})`);
  t.equal(s.b.h.app.gatewaySnapshot.current.stored.version, flips + 1, "B ends at the last version written");
});

t.test("a change written without an announcement is found by the version check", async (t) => {
  const s = await pair(t);
  const now = Date.now();
  const missed: RouteRecord = {
    id: "rt_unannounced",
    workspaceId: WORKSPACE,
    name: "unannounced",
    match: { prefix: "/unannounced" },
    upstream: s.upstream.url,
    policies: [{ id: "pol_auth", name: "auth", enabled: true, keyauth: { keyspaces: [s.apiId] } }],
    createdAt: now,
    updatedAt: now,
  };
  // Straight to the store, as a write whose announcement was lost: no instance is told.
  const version = await s.a.h.app.stores.routes.update((table) => ({ result: table.version + 1, routes: [...table.routes, missed] }));
  t.equal(version, 1, "the store is at version 1");
  const served = await servedWith(
    s.b,
    "/unannounced/1",
    s.bearer,
    200,
    `B takes up the table at its next version check (every ${ROUTE_VERSION_CHECK_MS} ms)`,
  );
  t.equal(served.body.url, "/unannounced/1", "forwarded to the upstream");
  t.equal(s.b.h.app.gatewaySnapshot.current.stored.version, 1, "B is at the stored version");
  await servedWith(s.a, "/unannounced/1", s.bearer, 200, "and so does A, which wrote it without telling itself");

  await s.a.h.app.stores.routes.update((table) => ({ result: undefined, routes: table.routes.filter((route) => route.id !== missed.id) }));
  await servedWith(s.b, "/unannounced/1", s.bearer, 404, "a deletion unannounced is found the same way");
  t.equal(s.b.h.app.gatewaySnapshot.current.stored.version, 2, "B is at version 2");
});
