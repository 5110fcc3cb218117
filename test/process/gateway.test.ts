import { createHash } from "node:crypto";
import { readFileSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import t from "tap";
import { post, startServer } from "../helpers/process.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";
import { startUpstream } from "../helpers/upstream.js";

const ROOT_KEY = "root_gateway_process_test";
const API = "api_gateway_process";

/** Peak resident memory of a process so far, in bytes (Linux). */
function peakRss(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmHWM:"));
  return Number(/(\d+)/.exec(line ?? "")?.[1] ?? 0) * 1024;
}

function configYaml(prefix: string, routes: string): string {
  return `storage:\n  redis: { url: "${REDIS_URL}", prefix: "${prefix}" }\nrootKeys:\n  - { key: "${ROOT_KEY}", workspaceId: ws_gateway, permissions: ["*"] }\napis:\n  - { id: ${API}, name: gateway-process, workspaceId: ws_gateway }\nlogging:\n  level: warn\nanalytics:\n  engine: off\n${routes}`;
}

t.test("keygate in front of an upstream, as a process: streaming, reload on SIGHUP and on file change", async (t) => {
  const first = await startUpstream(t);
  const second = await startUpstream(t);
  const prefix = uniquePrefix(t, "gateway");
  const path = join(mkdtempSync(join(tmpdir(), "keygate-gateway-")), "keygate.yaml");
  const routesTo = (name: string, upstream: string) => `routes:\n  - { name: ${name}, match: { prefix: /svc }, upstream: "${upstream}", apiId: ${API} }\n`;
  // Without the file watch, only SIGHUP reloads: the test can tell the two apart.
  const noWatch = "gateway: { watchConfig: false }\n";
  writeFileSync(path, configYaml(prefix, routesTo("first", first.url)) + noWatch);
  const server = await startServer(t, { KEYGATE_CONFIG: path });
  t.match(server.stdout(), /gateway: first \(\/svc -> http:\/\/127\.0\.0\.1:\d+\)/);
  const key = (await post(server.baseUrl, "keys.createKey", ROOT_KEY, { apiId: API })).body.data.key as string;
  const get = (p: string) => fetch(`${server.baseUrl}${p}`, { headers: { authorization: `Bearer ${key}` } });

  await t.test("50 MB stream through both ways, chunk by chunk, never held whole in keygate", async (t) => {
    const size = 50 * 1024 * 1024;
    const pid = server.child.pid as number;
    const before = peakRss(pid);

    // Upload: after 20 MB the client stops producing until the upstream has seen bytes. A gateway that
    // buffered the whole body before forwarding it would never forward any, and this would time out.
    const upload = createHash("sha256");
    const chunk = Buffer.alloc(256 * 1024, 3);
    let upstreamBytesWhileSending = 0;
    async function* body() {
      for (let sent = 0; sent < size; sent += chunk.length) {
        if (sent === 20 * 1024 * 1024) {
          await waitFor(async () => first.progress.received > 0);
          upstreamBytesWhileSending = first.progress.received;
        }
        upload.update(chunk);
        yield chunk;
      }
    }
    const uploaded = await fetch(`${server.baseUrl}/svc/echo`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/octet-stream" },
      body: Readable.from(body()) as unknown as ReadableStream,
      duplex: "half",
    } as RequestInit);
    t.ok(upstreamBytesWhileSending > 0, `the upstream had ${(upstreamBytesWhileSending / 1024 / 1024).toFixed(1)} MB while the client was still sending`);
    t.same(await uploaded.json(), { length: size, sha256: upload.digest("hex") }, "and received every byte, in order");

    // Download: the client takes one chunk and pauses; backpressure must then hold the upstream back. A gateway
    // that buffered the answer would let the upstream write all of it.
    const download = createHash("sha256");
    const response = await get(`/svc/bytes/${size}`);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    let received = 0;
    const firstChunk = await reader.read();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const upstreamSentAtPause = first.progress.sent;
    t.ok(upstreamSentAtPause < size, `while the client paused, the upstream had sent ${(upstreamSentAtPause / 1024 / 1024).toFixed(1)} of 50 MB`);
    for (let piece = firstChunk; !piece.done; piece = await reader.read()) {
      download.update(piece.value);
      received += piece.value.length;
    }
    t.equal(received, size, "the client received every byte");
    const expected = createHash("sha256");
    const sevens = Buffer.alloc(1024 * 1024, 7);
    for (let hashed = 0; hashed < size; hashed += sevens.length) expected.update(sevens);
    t.equal(download.digest("hex"), expected.digest("hex"), "and they are the upstream's");
    t.comment(`keygate's peak memory grew by ${((peakRss(pid) - before) / 1024 / 1024).toFixed(1)} MB while 100 MB went through`);
  });

  await t.test("SIGHUP reloads the routes; an invalid file leaves them; a changed file is picked up by itself", async (t) => {
    t.equal((await get("/svc/x")).status, 200);
    t.equal(first.seen.at(-1)?.url, "/svc/x");
    writeFileSync(path, configYaml(prefix, routesTo("second", second.url)) + noWatch);
    await new Promise((resolve) => setTimeout(resolve, 300));
    t.equal((await get("/svc/before-sighup")).status, 200);
    t.ok(first.seen.some((r) => r.url === "/svc/before-sighup"), "an edited file alone changes nothing without the watch");
    server.child.kill("SIGHUP");
    await waitFor(async () => (await get("/svc/after-sighup")).status === 200 && second.seen.some((r) => r.url === "/svc/after-sighup"));
    t.pass("after SIGHUP the new upstream serves");

    writeFileSync(path, "routes: [ { name: broken } ]\n");
    server.child.kill("SIGHUP");
    await new Promise((resolve) => setTimeout(resolve, 300));
    const stillServed = await get("/svc/after-bad-file");
    t.equal(stillServed.status, 200, "the routes in force stay");
    t.ok(second.seen.some((r) => r.url === "/svc/after-bad-file"));
  });

  await server.stop();
});

t.test("with watchConfig on, editing the file reloads the routes without a signal", async (t) => {
  const first = await startUpstream(t);
  const second = await startUpstream(t);
  const prefix = uniquePrefix(t, "watch");
  const path = join(mkdtempSync(join(tmpdir(), "keygate-watch-")), "keygate.yaml");
  const routesTo = (upstream: string) => `routes:\n  - { name: svc, match: { prefix: /svc }, upstream: "${upstream}", apiId: ${API} }\n`;
  writeFileSync(path, configYaml(prefix, routesTo(first.url)));
  const server = await startServer(t, { KEYGATE_CONFIG: path });
  const key = (await post(server.baseUrl, "keys.createKey", ROOT_KEY, { apiId: API })).body.data.key as string;
  const get = (p: string) => fetch(`${server.baseUrl}${p}`, { headers: { authorization: `Bearer ${key}` } });
  t.equal((await get("/svc/before")).status, 200);
  t.ok(first.seen.some((r) => r.url === "/svc/before"));
  writeFileSync(path, configYaml(prefix, routesTo(second.url)));
  await waitFor(async () => (await get("/svc/after")).status === 200 && second.seen.some((r) => r.url === "/svc/after"));
  t.pass("the edited file's upstream serves");
  await server.stop();
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error("condition not met in time");
}
