import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { parseScrape } from "../helpers/metrics.js";
import { post, type RunningServer, run, SERVER_ENTRY, startServer } from "../helpers/process.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

const ROOT_KEY = "root_workers_test_all_permissions";
const API = "api_workers_test";

/** The pids that wrote log lines with `message`. */
function pidsLogging(server: RunningServer, message: string): Set<number> {
  return new Set(
    server
      .logLines()
      .filter((line) => line.msg === message)
      .map((line) => line.pid as number),
  );
}

/** A call on a connection of its own (Connection: close), so that successive calls reach the workers in turn. */
async function call(server: RunningServer, procedure: string, body: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(`${server.baseUrl}/v2/${procedure}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${ROOT_KEY}`, connection: "close" },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

t.test("keygate with two workers on Redis", async (t) => {
  const upstream = await startUpstream(t);
  const directory = mkdtempSync(join(tmpdir(), "keygate-workers-"));
  t.teardown(() => rmSync(directory, { recursive: true, force: true }));
  const path = join(directory, "keygate.yaml");
  const configWith = (routePrefix: string) =>
    writeFileSync(
      path,
      [
        "server: { workers: 2 }",
        `storage:\n  redis: { url: "${REDIS_URL}", prefix: "${uniquePrefix(t, "workers")}" }`,
        `rootKeys:\n  - { key: "${ROOT_KEY}", workspaceId: ws_workers, permissions: ["*"] }`,
        `apis:\n  - { id: ${API}, name: workers, workspaceId: ws_workers }`,
        "logging: { level: info, requests: true }",
        `analytics: { path: "${join(directory, "analytics")}", buffer: { flushIntervalMs: 100 } }`,
        "gateway: { watchConfig: false, apiRoutes: { allowedUpstreams: [127.0.0.0/8] } }",
        `routes:\n  - { name: svc, match: { prefix: ${routePrefix} }, upstream: "${upstream.url}", apiId: ${API}, namespaceLimits: [{ namespace: svc.calls, identifier: key, limit: 1000, duration: 60000 }] }`,
        "",
      ].join("\n"),
    );
  configWith("/svc");
  const server = await startServer(t, { KEYGATE_CONFIG: path }, 30_000);
  const workerPids = () => pidsLogging(server, "worker listening");
  let victimPid = 0;
  t.equal(workerPids().size, 2, "two workers listen");

  await t.test("the workers share a rate limit exactly, and analytics counts every verification of both", async (t) => {
    const created = await call(server, "keys.createKey", {
      apiId: API,
      ratelimits: [{ name: "requests", limit: 10, duration: 60_000, autoApply: true }],
    });
    t.equal(created.status, 200);
    const codes: string[] = [];
    for (let i = 0; i < 30; i++) codes.push((await call(server, "keys.verifyKey", { key: created.body.data.key })).body.data.code);
    t.equal(codes.filter((code) => code === "VALID").length, 10, "10 of 30 allowed, as the limit says");
    t.equal(codes.filter((code) => code === "RATE_LIMITED").length, 20);
    const served = new Set(
      server
        .logLines()
        .filter((line) => line.msg === "request" && line.route === "keys.verifyKey")
        .map((line) => line.pid),
    );
    t.equal(served.size, 2, "both workers served verifications");

    const count = await waitFor("every verification in analytics", 20_000, async (because) => {
      const answer = await call(server, "analytics.getVerifications", {
        query: `SELECT count() AS n FROM key_verifications_v1 WHERE key_id = '${created.body.data.keyId}'`,
      });
      const n = answer.body.data?.[0]?.n;
      because(`count ${n} (${answer.status})`);
      return n === 30 ? n : undefined;
    });
    t.equal(count, 30);

    const scrape = parseScrape(await (await fetch(`${server.baseUrl}/metrics`)).text());
    const verifications =
      scrape.value("keygate_verifications_total", { source: "api", outcome: "VALID" }) +
      scrape.value("keygate_verifications_total", { source: "api", outcome: "RATE_LIMITED" });
    t.equal(verifications, 30, "GET /metrics adds up the verifications of both workers");
  });

  await t.test("the audit log holds the writes of both workers, and either lists them all", async (t) => {
    const made: string[] = [];
    for (let i = 0; i < 10; i++)
      made.push((await call(server, "identities.createIdentity", { externalId: `audited_${i}` })).body.data.identityId);
    const served = new Set(
      server
        .logLines()
        .filter((line) => line.msg === "request" && line.route === "identities.createIdentity")
        .map((line) => line.pid),
    );
    t.equal(served.size, 2, "both workers made identities");
    for (let i = 0; i < 4; i++) {
      const listed = await call(server, "keygate.listAuditLogs", { action: "identity.create" });
      t.same(
        listed.body.data.map((entry: { resources: { id: string }[] }) => entry.resources[0]?.id).sort(),
        [...made].sort(),
        `listing ${i + 1}: every entry, whichever worker answers`,
      );
    }
  });

  await t.test("analytics counts the rate limit decisions and gateway requests of both workers", async (t) => {
    const key = (await call(server, "keys.createKey", { apiId: API })).body.data.key as string;
    for (let i = 0; i < 10; i++) {
      const limited = await call(server, "ratelimit.limit", {
        namespace: "workers.calls",
        identifier: "user",
        limit: 100,
        duration: 60_000,
      });
      t.equal(limited.status, 200);
    }
    for (let i = 0; i < 6; i++) {
      const response = await fetch(`${server.baseUrl}/svc/x`, { headers: { authorization: `Bearer ${key}`, connection: "close" } });
      t.equal(response.status, 200);
    }
    const served = new Set(
      server
        .logLines()
        .filter((line) => line.msg === "request" && (line.route === "ratelimit.limit" || line.route === "svc"))
        .map((line) => line.pid),
    );
    t.equal(served.size, 2, "both workers served them");

    const counted = (procedure: string, query: string, expected: number) =>
      waitFor(`${expected} rows from ${procedure}`, 20_000, async (because) => {
        const answer = await call(server, procedure, { query });
        const n = answer.body.data?.[0]?.n;
        because(`count ${n} (${answer.status})`);
        return n === expected ? n : undefined;
      });
    t.equal(
      await counted("analytics.getRatelimits", "SELECT count() AS n FROM ratelimits_v1", 16),
      16,
      "10 limit calls and 6 gateway namespace limits",
    );
    t.equal(await counted("analytics.getGatewayRequests", "SELECT count() AS n FROM gateway_requests_v1 WHERE app_id = 'svc'", 6), 6);
  });

  await t.test(
    "a route created through /v2 on one worker is served by every worker, and its deletion taken up by every worker",
    async (t) => {
      const key = (await call(server, "keys.createKey", { apiId: API })).body.data.key as string;
      const get = async (path: string) => {
        const response = await fetch(`${server.baseUrl}${path}`, { headers: { authorization: `Bearer ${key}`, connection: "close" } });
        await response.arrayBuffer();
        return response.status;
      };
      /** The pids that answered a request under /stored as `route` with `status`, in the log lines from `from` on. */
      const answeredBy = (route: string, status: number, from: number) =>
        new Set(
          server
            .logLines()
            .slice(from)
            .filter(
              (line) => line.msg === "request" && line.route === route && line.status === status && String(line.url).startsWith("/stored"),
            )
            .map((line) => line.pid),
        );
      const created = await call(server, "keygate.createRoute", {
        name: "stored",
        match: { prefix: "/stored" },
        upstream: upstream.url,
        policies: [{ name: "auth", enabled: true, keyauth: { keyspaces: [API] } }],
      });
      t.equal(created.status, 200, created.status === 200 ? "created through /v2" : JSON.stringify(created.body));
      // One worker wrote it; the other learns of it from Redis. A worker that serves the route once serves it from then on.
      await waitFor("both workers serve the stored route", 20_000, async (because) => {
        const status = await get("/stored/x");
        const pids = answeredBy("stored", 200, 0);
        because(`last answer ${status}; served by ${pids.size} worker(s)`);
        return pids.size === 2 ? true : undefined;
      });
      for (let i = 0; i < 4; i++) t.equal(await get("/stored/x"), 200, `request ${i + 1} served, whichever worker takes it`);

      const before = server.logLines().length;
      t.equal((await call(server, "keygate.deleteRoute", { route: "stored" })).status, 200, "deleted through /v2");
      await waitFor("neither worker takes the deleted route", 20_000, async (because) => {
        const status = await get("/stored/x");
        const pids = answeredBy("unmatched", 404, before);
        because(`last answer ${status}; 404 from ${pids.size} worker(s)`);
        return pids.size === 2 ? true : undefined;
      });
      for (let i = 0; i < 4; i++) t.equal(await get("/stored/x"), 404, `request ${i + 1} unmatched, whichever worker takes it`);
    },
  );

  await t.test("SIGHUP reloads the routes of every worker", async (t) => {
    configWith("/moved");
    server.child.kill("SIGHUP");
    await waitFor("both workers reloaded", 10_000, () => (pidsLogging(server, "routes reloaded").size === 2 ? true : undefined));
    const reloads = await waitFor("both workers' reloads in the audit log", 10_000, async (because) => {
      const listed = (await call(server, "keygate.listAuditLogs", { action: "config.reload" })).body.data;
      because(`${listed.length} entries`);
      return listed.length === 2 ? listed : undefined;
    });
    t.equal(reloads.length, 2, "each worker records the reload it applied");
    t.match(reloads[0], { actor: { type: "system" }, changes: [{ field: "routes.svc" }] });
    const key = (await post(server.baseUrl, "keys.createKey", ROOT_KEY, { apiId: API })).body.data.key;
    for (let i = 0; i < 4; i++) {
      const response = await fetch(`${server.baseUrl}/moved/x`, { headers: { authorization: `Bearer ${key}`, connection: "close" } });
      t.equal(response.status, 200, `request ${i + 1} takes the reloaded route`);
    }
  });

  await t.test("a worker that dies is replaced and logged", async (t) => {
    const [victim] = [...workerPids()];
    victimPid = victim as number;
    process.kill(victimPid, "SIGKILL");
    const died = await waitFor("the death logged", 10_000, () => server.logLines().find((line) => line.msg === "a worker died"));
    t.equal(died.workerPid, victim);
    t.equal(died.signal, "SIGKILL");
    t.equal(died.level, 50, "at error");
    await waitFor("the replacement logged", 10_000, () =>
      server.logLines().some((line) => line.msg === "started a replacement worker") ? true : undefined,
    );
    await waitFor("a replacement listening", 15_000, () => (workerPids().size === 3 ? true : undefined));
    for (let i = 0; i < 4; i++) t.equal((await call(server, "apis.getApi", { apiId: API })).status, 200, `request ${i + 1} answered`);
  });

  await t.test("SIGTERM stops every worker and then the primary, with exit code 0, also when all get it at once", async (t) => {
    const live = [...workerPids()].filter((pid) => pid !== victimPid);
    // As systemd (KillMode=control-group) or Ctrl-C on a terminal do: the signal reaches every process at once.
    for (const pid of live) process.kill(pid, "SIGTERM");
    t.equal(await server.stop(), 0);
    t.notOk(
      server.logLines().filter((line) => line.msg === "started a replacement worker").length > 1,
      "no worker replaced while keygate stops",
    );
    t.ok(server.logLines().some((line) => line.msg === "closed: every worker stopped, buffered analytics events written"));
    const closedWorkers = pidsLogging(server, "closed: every request answered, buffered analytics events written, connections released");
    t.equal(closedWorkers.size, 2, "both live workers closed gracefully");
  });
});

t.test("more than one worker on in-memory stores is refused at start-up", async (t) => {
  const result = await run(SERVER_ENTRY, [], { KEYGATE_WORKERS: "2", KEYGATE_ANALYTICS_ENGINE: "off", PORT: "0" });
  t.equal(result.code, 1);
  t.match(result.stderr, /server\.workers: more than one worker needs Redis stores/);
});
