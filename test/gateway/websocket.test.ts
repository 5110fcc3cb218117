import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import WebSocket from "ws";
import { createKey, getKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { headerValues, openConnection, rawRequest, sendUntilClosed } from "../helpers/raw-http.js";
import { startUpstream } from "../helpers/upstream.js";

const API = "api_websocket_test";

/** Opens a WebSocket; resolves with it once open, or with the HTTP status the gateway refused it with. */
function connect(url: string, headers: Record<string, string> = {}): Promise<{ socket?: WebSocket; status?: number; body?: any }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers });
    socket.once("open", () => resolve({ socket }));
    socket.once("unexpected-response", (_request, response) => {
      let text = "";
      response.on("data", (chunk: Buffer) => (text += chunk.toString()));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) }));
    });
    socket.once("error", reject);
  });
}

/** An upstream that refuses every upgrade with a chunked 403 carrying hop-by-hop headers. */
async function startRefusingUpstream(t: Test): Promise<string> {
  const server = createServer((_request, response) => response.end());
  server.on("upgrade", (_request, socket) => {
    socket.end(
      "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n" +
        'Keep-Alive: timeout=9\r\nProxy-Authenticate: Basic realm="up"\r\nX-End-To-End: kept\r\n\r\n5\r\nnope!\r\n6\r\n again\r\n0\r\n\r\n',
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

t.test("WebSocket upgrades pass the same checks, then are relayed both ways", async (t) => {
  const upstream = await startUpstream(t);
  const refusing = await startRefusingUpstream(t);
  const h = await harness(t, {
    config: {
      apis: [{ id: API, name: "sockets", workspaceId: "ws_test" }],
      routes: [
        {
          name: "live",
          match: { prefix: "/live" },
          upstream: upstream.url,
          apiId: API,
          permissions: "live.read",
          forward: { keyId: "x-keygate-key-id" },
        },
        { name: "gone", match: { prefix: "/gone" }, upstream: "http://127.0.0.1:9", apiId: API },
        { name: "refusing", match: { prefix: "/refusing" }, upstream: refusing, apiId: API },
        { name: "metered", match: { prefix: "/metered" }, upstream: upstream.url, apiId: API, credits: { cost: 1 } },
      ],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `ws://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const allowed = await createKey(h, API, { permissions: ["live.read"] });
  const lacking = await createKey(h, API);

  await t.test("an allowed upgrade is relayed; messages flow both ways; the key does not reach the upstream", async (t) => {
    const { socket } = await connect(`${base}/live/feed`, { authorization: `Bearer ${allowed.key}` });
    t.ok(socket);
    const reply = new Promise<string>((resolve) => socket?.once("message", (data) => resolve(data.toString())));
    socket?.send("hello");
    t.equal(await reply, "echo:hello");
    socket?.close();
    const upgrade = upstream.seen.at(-1);
    t.equal(upgrade?.url, "/live/feed");
    t.equal(upgrade?.headers.authorization, undefined);
    t.equal(upgrade?.headers["x-keygate-key-id"], allowed.keyId);
  });

  await t.test("an upgrade passes on Connection: Upgrade and Upgrade, and no other hop-by-hop header", async (t) => {
    const headers = {
      authorization: `Bearer ${allowed.key}`,
      "proxy-authorization": "Basic dXNlcjpwYXNz",
      "keep-alive": "timeout=1",
      "x-end-to-end": "kept",
    };
    const { socket } = await connect(`${base}/live/hops`, headers);
    t.ok(socket, "the upgrade is accepted");
    socket?.close();
    const upgrade = upstream.seen.at(-1);
    t.equal(upgrade?.url, "/live/hops");
    t.match(upgrade?.headers.connection, /^upgrade$/i);
    t.equal(upgrade?.headers.upgrade, "websocket");
    t.equal(upgrade?.headers["proxy-authorization"], undefined);
    t.equal(upgrade?.headers["keep-alive"], undefined);
    t.equal(upgrade?.headers["x-end-to-end"], "kept");
  });

  await t.test("an upstream's refusal of an upgrade reaches the client whole, without its hop-by-hop headers", async (t) => {
    const port = Number(new URL(base).port);
    const response = await sendUntilClosed(
      port,
      rawRequest("GET", "/refusing/ws", [
        ["Host", "gateway.test"],
        ["Authorization", `Bearer ${allowed.key}`],
        ["Connection", "Upgrade"],
        ["Upgrade", "websocket"],
        ["Sec-WebSocket-Version", "13"],
        ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="],
      ]),
    );
    t.equal(response.status, 403);
    t.equal(response.body, "nope! again", "the body, decoded once, framed by the connection's end");
    t.same(headerValues(response, "x-end-to-end"), ["kept"]);
    for (const name of ["transfer-encoding", "x-hop", "keep-alive", "proxy-authenticate"])
      t.same(headerValues(response, name), [], `${name} is not passed on`);
    t.same(headerValues(response, "connection"), ["close"]);
  });

  await t.test("a refused upgrade is an HTTP error in the envelope, and never reaches the upstream", async (t) => {
    const before = upstream.seen.length;
    const missing = await connect(`${base}/live/feed`);
    t.same([missing.status, missing.body.error.type.split("/").pop()], [401, "missing_key"]);
    t.same((await connect(`${base}/live/feed`, { authorization: "Bearer sk_unknown" })).status, 401);
    const forbidden = await connect(`${base}/live/feed`, { authorization: `Bearer ${lacking.key}` });
    t.same([forbidden.status, forbidden.body.error.type.split("/").pop()], [403, "insufficient_permissions"]);
    t.same((await connect(`${base}/nowhere`)).status, 404);
    t.equal(upstream.seen.length, before);
  });

  await t.test("an upstream that cannot be reached is a 502", async (t) => {
    const down = await connect(`${base}/gone`, { authorization: `Bearer ${allowed.key}` });
    t.same([down.status, down.body.error.type.split("/").pop()], [502, "upstream_unreachable"]);
  });

  await t.test("an upstream that answered an upgrade is not a failure when its answer breaks off: the credit stays spent", async (t) => {
    // HEAD with an upgrade to a protocol the upstream does not speak: it answers 200 with a body, which a HEAD answer
    // must not have, so the connection breaks after the answer arrived.
    const metered = await createKey(h, API, { credits: { remaining: 10 } });
    const before = upstream.seen.length;
    const port = (h.app.server.address() as AddressInfo).port;
    const connection = await openConnection(port);
    connection.socket.write(
      rawRequest("HEAD", "/metered/x", [
        ["Host", "gateway.test"],
        ["Connection", "Upgrade"],
        ["Upgrade", "h2c"],
        ["Authorization", `Bearer ${metered.key}`],
      ]),
    );
    const answer = (await connection.closed).toString();
    t.match(answer, /^HTTP\/1\.1 200 /, "the upstream's answer is passed on");
    t.equal(upstream.seen.length, before + 1, "the upstream got the request");
    t.equal((await getKey(h, metered.keyId)).credits.remaining, 9, "its credit was spent once, not given back");
  });
});
