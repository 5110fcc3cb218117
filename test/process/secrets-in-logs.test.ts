import { mkdtempSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import WebSocket from "ws";
import { freePort } from "../helpers/ports.js";
import { post, startServer } from "../helpers/process.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

const ROOT_KEY = "root_logs_configured_Zq7Lk2Vx9";
const WRONG_ROOT_KEY = "root_logs_wrong_Mw3Pq8Tr5";
const API = "api_logs_process";

/** Every byte of `text` percent-encoded: a client may encode a key this way and keygate still reads it. */
function fullyEncoded(text: string): string {
  return [...Buffer.from(text)].map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, "0")}`).join("");
}

/** The forms in which a secret could show up in a log line. */
function forms(secret: string): string[] {
  return [...new Set([secret, encodeURIComponent(secret), fullyEncoded(secret), JSON.stringify(secret).slice(1, -1)])];
}

/** A WebSocket handshake through keygate: resolves with the status the upgrade got (101 when it went through). */
function upgrade(url: string): Promise<number> {
  return new Promise((resolve) => {
    const socket = new WebSocket(url);
    socket.on("open", () => {
      socket.close();
      resolve(101);
    });
    socket.on("unexpected-response", (_request, response) => {
      resolve(response.statusCode ?? 0);
      socket.terminate();
    });
    socket.on("error", () => resolve(0));
  });
}

/** GET over a raw request (fetch would normalise the dot segments away). */
function rawGet(baseUrl: string, path: string): Promise<number> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const request = httpRequest({ hostname, port, path, method: "GET" }, (response) => {
      response.resume();
      response.on("end", () => resolve(response.statusCode ?? 0));
    });
    request.on("error", reject);
    request.end();
  });
}

t.test("no API key or root key reaches the log, at level trace with request logging, whatever the key location", async (t) => {
  const upstream = await startUpstream(t);
  const dead = `http://127.0.0.1:${await freePort()}`;
  const route = (name: string, prefix: string, target: string, key = "") =>
    `  - { name: ${name}, match: { prefix: ${prefix} }, upstream: "${target}", apiId: ${API}${key} }\n`;
  const path = join(mkdtempSync(join(tmpdir(), "keygate-logs-")), "keygate.yaml");
  const configuration = (extraRoutes: string) =>
    `rootKeys:\n  - { key: "${ROOT_KEY}", workspaceId: ws_logs, permissions: ["*"] }\n` +
    `apis:\n  - { id: ${API}, name: logs, workspaceId: ws_logs }\n` +
    "logging: { level: trace, requests: true }\nanalytics: { engine: off }\n" +
    "routes:\n" +
    route("bearer", "/bearer", upstream.url) +
    route("header", "/header", upstream.url, ", key: { header: X-Api-Key }") +
    route("scheme", "/scheme", upstream.url, ", key: { header: X-Auth, scheme: Token }") +
    route("query", "/q", upstream.url, ", key: { query: api_key }") +
    route("down-query", "/down-q", dead, ", key: { query: token }") +
    route("down-bearer", "/down-b", dead) +
    extraRoutes;
  writeFileSync(path, configuration(""));
  const server = await startServer(t, { KEYGATE_CONFIG: path });

  const created = await post(server.baseUrl, "keys.createKey", ROOT_KEY, { apiId: API, prefix: "sk" });
  t.equal(created.status, 200);
  const key = created.body.data.key as string;
  const unknownKey = "sk_unknown+/=Lq4Wn8Hs2";
  const secrets = [ROOT_KEY, WRONG_ROOT_KEY, key, unknownKey];
  const get = (p: string, headers: Record<string, string> = {}) =>
    fetch(`${server.baseUrl}${p}`, { headers }).then((response) => response.status);

  for (const [candidate, expected] of [
    [key, 200],
    [unknownKey, 401],
  ] as const) {
    t.equal(await get("/bearer/a", { authorization: `Bearer ${candidate}` }), expected, "Authorization: Bearer");
    t.equal(await get("/header/a", { "x-api-key": candidate }), expected, "a header of its own");
    t.equal(await get("/scheme/a", { "x-auth": `Token ${candidate}` }), expected, "a header with a scheme");
    t.equal(await get(`/q/a?page=2&api_key=${encodeURIComponent(candidate)}`), expected, "a query parameter");
    t.equal(await get(`/q/a?api%5Fkey=${fullyEncoded(candidate)}`), expected, "a query parameter, its name and value percent-encoded");
    t.equal(
      await upgrade(`${server.baseUrl.replace("http", "ws")}/q/ws?api_key=${encodeURIComponent(candidate)}`),
      expected === 200 ? 101 : 401,
      "a WebSocket upgrade",
    );
  }
  t.equal(await get(`/down-q/a?token=${key}`), 502, "an upstream that refuses the connection, key in the query");
  t.equal(await get("/down-b/a", { authorization: `Bearer ${key}` }), 502, "and key in Authorization");
  t.ok((await rawGet(server.baseUrl, `/q/a/..?api_key=${key}`)) > 0, "a path the proxy may refuse");
  t.equal(await get("/q/a"), 401, "no key at all");

  t.equal(
    (await post(server.baseUrl, "keys.verifyKey", ROOT_KEY, { key })).body.data.valid,
    true,
    "/v2 with the root key, the key in the body",
  );
  t.equal((await post(server.baseUrl, "keys.verifyKey", ROOT_KEY, { key: unknownKey })).body.data.valid, false);
  t.equal((await post(server.baseUrl, "apis.getApi", WRONG_ROOT_KEY, { apiId: API })).status, 401, "an unknown root key");
  const unreadable = await fetch(`${server.baseUrl}/v2/keys.verifyKey`, {
    method: "POST",
    headers: { authorization: `Bearer ${ROOT_KEY}`, "content-type": "application/json" },
    body: `{"key":"${key}"`,
  });
  t.equal(unreadable.status, 400, "a body that is not JSON");

  writeFileSync(path, configuration(route("late", "/late", upstream.url, ", key: { query: late_key }")));
  server.child.kill("SIGHUP");
  await waitFor("keygate logs that the routes were reloaded", 10_000, () =>
    server.stdout().includes("routes reloaded") ? true : undefined,
  );
  t.equal(await get(`/late/a?late_key=${key}`), 200, "a key location added by a reload");

  t.equal(await server.stop(), 0);
  const output = server.stdout() + server.stderr();
  for (const secret of secrets) {
    for (const form of forms(secret)) t.notOk(output.includes(form), `'${form}' is nowhere in the log`);
  }
  const lines = server.logLines();
  const urls = lines.map((line) => line.url).filter((url): url is string => typeof url === "string");
  t.ok(
    urls.some((url) => url.startsWith("/q/a?page=2&api_key=")),
    "request lines name the URL and its key parameter",
  );
  t.ok(
    lines.some((line) => line.msg === "upstream failed"),
    "upstream failures are logged",
  );
});
