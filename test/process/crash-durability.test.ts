import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t, { type Test } from "tap";
import { analyticsDirectory, post, type RunningServer, startServer } from "../helpers/process.js";
import { privateRedis } from "../helpers/redis-server.js";
import { waitFor } from "../helpers/wait.js";
import { Receiver } from "../helpers/webhook-receiver.js";

/**
 * What keygate answered survives a kill -9 (docs/audit-log.md#what-survives-what, docs/webhooks.md): a child keygate
 * takes N management writes (apis.createApi) and N webhook-triggering writes (keys.createKey), all answered 200,
 * and is killed at once (SIGKILL, no shutdown of any kind). A new process on the same state (the same Redis, the
 * same analytics directory) lists every answered write's audit entry exactly once and, on Redis, delivers every
 * key.created event to a real receiver (deduplicated by webhook-id: delivery is at least once).
 */

const ROOT_KEY = "root_crash_durability_all";
const WORKSPACE = "ws_crash";
const API = "api_crash";
const WRITES = 20;
/** How many writes are in flight at once: concurrent writes share a journal flush or an outbox write. */
const CONCURRENCY = 5;

/** A port of 7400-7499 (this work's range for private Redis servers) nobody listens on. */
async function privatePort(): Promise<number> {
  for (let port = 7400 + Math.floor(Math.random() * 50); port < 7500; port++) {
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once("error", () => resolve(false));
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error("no free port in 7400-7499");
}

/** The configuration both processes read; the analytics directory comes from KEYGATE_ANALYTICS_PATH. */
function configFile(t: Test, storage: string): string {
  const directory = mkdtempSync(join(tmpdir(), "keygate-crash-"));
  t.teardown(() => rmSync(directory, { recursive: true, force: true }));
  const path = join(directory, "keygate.yaml");
  writeFileSync(
    path,
    `${storage}rootKeys:\n  - { key: "${ROOT_KEY}", workspaceId: ${WORKSPACE}, permissions: ["*"] }\n` +
      `apis:\n  - { id: ${API}, name: crash, workspaceId: ${WORKSPACE} }\n` +
      "analytics:\n  engine: embedded\n" +
      "webhooks:\n  allowPrivateAddresses: true\n  pollIntervalMs: 100\nlogging:\n  level: warn\n",
  );
  return path;
}

async function ok(server: RunningServer, procedure: string, body: unknown): Promise<any> {
  const answer = await post(server.baseUrl, procedure, ROOT_KEY, body);
  if (answer.status !== 200) throw new Error(`${procedure} answered ${answer.status}: ${JSON.stringify(answer.body)}`);
  return answer.body.data;
}

/** `count` calls of `write`, CONCURRENCY at a time; resolves with what each answered. */
async function writes<T>(count: number, write: (index: number) => Promise<T>): Promise<T[]> {
  const answers: T[] = [];
  for (let start = 0; start < count; start += CONCURRENCY) {
    const batch = Array.from({ length: Math.min(CONCURRENCY, count - start) }, (_, offset) => write(start + offset));
    answers.push(...(await Promise.all(batch)));
  }
  return answers;
}

/** Every audit entry of `action` in the workspace, following the cursor. */
async function auditEntries(
  server: RunningServer,
  action: string,
): Promise<{ auditLogId: string; resources: { type: string; id: string }[] }[]> {
  const entries = [];
  let cursor: string | undefined;
  do {
    const answer = await post(server.baseUrl, "keygate.listAuditLogs", ROOT_KEY, { action, limit: 100, ...(cursor ? { cursor } : {}) });
    if (answer.status !== 200) throw new Error(`listAuditLogs answered ${answer.status}: ${JSON.stringify(answer.body)}`);
    entries.push(...answer.body.data);
    cursor = answer.body.pagination?.cursor;
  } while (cursor);
  return entries;
}

/** How often each id of `ids` is named by an entry (as the resource of `type`). */
function countsOf(entries: { resources: { type: string; id: string }[] }[], type: string, ids: readonly string[]): Map<string, number> {
  const counts = new Map(ids.map((id) => [id, 0]));
  for (const entry of entries) {
    for (const resource of entry.resources) {
      if (resource.type === type && counts.has(resource.id)) counts.set(resource.id, (counts.get(resource.id) as number) + 1);
    }
  }
  return counts;
}

/** Waits until every id has exactly one entry; fails at once on an id with two. */
async function everyEntryOnce(t: Test, server: RunningServer, action: string, type: string, ids: readonly string[]): Promise<void> {
  await waitFor(`every ${action} entry is listed`, 30_000, async (because) => {
    const counts = countsOf(await auditEntries(server, action), type, ids);
    const twice = [...counts].filter(([, count]) => count > 1);
    if (twice.length > 0) throw new Error(`listed more than once: ${twice.map(([id]) => id).join(", ")}`);
    const missing = [...counts].filter(([, count]) => count === 0).length;
    because(`${missing} of ${ids.length} missing`);
    return missing === 0 ? true : undefined;
  });
  const counts = countsOf(await auditEntries(server, action), type, ids);
  t.same(
    [...counts.values()].filter((count) => count !== 1),
    [],
    `each of the ${ids.length} answered ${action} writes has exactly one entry`,
  );
}

async function answeredWrites(server: RunningServer): Promise<{ apiIds: string[]; keyIds: string[] }> {
  const [apis, keys] = await Promise.all([
    writes(WRITES, (index) => ok(server, "apis.createApi", { name: `crash-${index}` })),
    writes(WRITES, () => ok(server, "keys.createKey", { apiId: API })),
  ]);
  return { apiIds: apis.map((api) => api.apiId as string), keyIds: keys.map((key) => key.keyId as string) };
}

t.test("on Redis: every answered write's audit entry and event, and an answered crossing's event, survive a kill -9", async (t) => {
  const redis = await privateRedis(t, { persistent: true, port: await privatePort() });
  const receiver = new Receiver();
  await receiver.start();
  t.teardown(() => receiver.stop());
  const analytics = analyticsDirectory(t);
  const env = { KEYGATE_CONFIG: configFile(t, `storage:\n  redis: { url: "${redis.url}" }\n`), KEYGATE_ANALYTICS_PATH: analytics };

  const first = await startServer(t, env, 60_000);
  await ok(first, "keygate.createWebhook", { url: receiver.url, events: ["key.created", "key.credits.low"] });
  const metered = await ok(first, "keys.createKey", { apiId: API, credits: { remaining: 2, lowThreshold: 1 } });
  const { apiIds, keyIds } = await answeredWrites(first);
  // A verification on the request path that crosses the threshold: its notice is durable before its answer too.
  t.match(await ok(first, "keys.verifyKey", { key: metered.key }), { valid: true, credits: 1 });
  first.child.kill("SIGKILL");
  await new Promise((resolve) => first.child.once("exit", resolve));

  const second = await startServer(t, env, 60_000);
  const delivered = await waitFor("every key.created event is delivered", 30_000, (because) => {
    const byId = new Map(receiver.of("key.created").map((received) => [received.headers["webhook-id"], received.event.data]));
    const keyIdsDelivered = new Set([...byId.values()].map((data) => data.keyId as string));
    const missing = keyIds.filter((id) => !keyIdsDelivered.has(id));
    because(`${missing.length} of ${keyIds.length} missing`);
    return missing.length === 0 ? byId : undefined;
  });
  t.equal(
    [...delivered.values()].filter((data) => keyIds.includes(data.keyId)).length,
    keyIds.length,
    "one event (one webhook-id) per answered keys.createKey",
  );
  await waitFor("the credits crossing is delivered", 30_000, () =>
    receiver.of("key.credits.low").some((received) => received.event.data.keyId === metered.keyId) ? true : undefined,
  );
  t.pass("key.credits.low of the answered verification delivered");
  await everyEntryOnce(t, second, "api.create", "api", apiIds);
  await everyEntryOnce(t, second, "key.create", "key", keyIds);
  await second.stop();
});

t.test("on memory stores with the embedded engine: every answered write's audit entry survives a kill -9", async (t) => {
  const env = { KEYGATE_CONFIG: configFile(t, ""), KEYGATE_ANALYTICS_PATH: analyticsDirectory(t) };

  const first = await startServer(t, env, 60_000);
  const { apiIds, keyIds } = await answeredWrites(first);
  first.child.kill("SIGKILL");
  await new Promise((resolve) => first.child.once("exit", resolve));

  // The stores were in the killed process's memory (the APIs, keys and webhook endpoints with them): what
  // survives is the audit log, kept in the analytics directory.
  const second = await startServer(t, env, 60_000);
  await everyEntryOnce(t, second, "api.create", "api", apiIds);
  await everyEntryOnce(t, second, "key.create", "key", keyIds);
  await second.stop();
});

/** An upstream answering 200 to each request, counting what reached it. */
async function countingUpstream(t: Test): Promise<{ url: string; arrived(): number }> {
  let arrived = 0;
  const server = createHttpServer((_request, response) => {
    arrived++;
    response.end("served");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, arrived: () => arrived };
}

t.test(
  "under gateway load with credits, a kill -9 charges each answered request once and nothing beyond the requests it cut",
  async (t) => {
    const redis = await privateRedis(t, { persistent: true, port: await privatePort() });
    const upstream = await countingUpstream(t);
    const route = `routes:\n  - { name: metered, match: { prefix: /svc }, upstream: "${upstream.url}", apiId: ${API}, credits: { cost: 1 } }\n`;
    const env = {
      KEYGATE_CONFIG: configFile(t, `storage:\n  redis: { url: "${redis.url}" }\n${route}`),
      KEYGATE_ANALYTICS_PATH: analyticsDirectory(t),
    };
    const BALANCE = 100_000;
    const first = await startServer(t, env, 60_000);
    const { key, keyId } = await ok(first, "keys.createKey", { apiId: API, credits: { remaining: BALANCE } });
    const remaining = async (server: RunningServer) => (await ok(server, "keys.getKey", { keyId })).credits.remaining as number;

    let answered = 0;
    let cut = 0;
    let running = true;
    let killed = false;
    const client = async () => {
      while (running) {
        try {
          const response = await fetch(`${first.baseUrl}/svc/item`, { headers: { authorization: `Bearer ${key}` } });
          await response.arrayBuffer();
          if (response.status !== 200) throw new Error(`answered ${response.status}`);
          answered++;
        } catch (error) {
          if (!killed) throw error;
          cut++;
        }
      }
    };
    // A first phase, ended before the kill: spent credits equal the answers, as the refund tests hold.
    const stopAfter = async (count: number) => {
      const clients = Array.from({ length: CONCURRENCY * 2 }, client);
      await waitFor(`${count} answers`, 60_000, () => (answered >= count ? true : undefined));
      return clients;
    };
    running = true;
    let clients = await stopAfter(200);
    running = false;
    await Promise.all(clients);
    t.equal(BALANCE - (await remaining(first)), answered, "before the kill: credits spent = requests answered");

    running = true;
    clients = await stopAfter(answered + 300);
    killed = true;
    first.child.kill("SIGKILL");
    await new Promise((resolve) => first.child.once("exit", resolve));
    running = false;
    await Promise.all(clients);

    const second = await startServer(t, env, 60_000);
    const spent = BALANCE - (await remaining(second));
    t.comment(
      `answered ${answered}, cut by the kill ${cut}, credits spent ${spent}, requests that reached the upstream ${upstream.arrived()}`,
    );
    t.ok(spent >= answered, "every answered request stays charged after the kill (its spend was on Redis before its answer)");
    t.ok(spent <= answered + cut, "and nothing is charged beyond the requests the kill cut (no spend twice, none lost and redone)");
    t.ok(upstream.arrived() >= answered, "every answered request reached the upstream");
    await second.stop();
  },
);
