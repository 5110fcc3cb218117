import type { AddressInfo } from "node:net";
import t from "tap";
import WebSocket from "ws";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
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

t.test("WebSocket upgrades pass the same checks, then are relayed both ways", async (t) => {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    config: {
      apis: [{ id: API, name: "sockets", workspaceId: "ws_test" }],
      routes: [
        { name: "live", match: { prefix: "/live" }, upstream: upstream.url, apiId: API, permissions: "live.read", forward: { keyId: "x-keygate-key-id" } },
        { name: "gone", match: { prefix: "/gone" }, upstream: "http://127.0.0.1:9", apiId: API },
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
});
