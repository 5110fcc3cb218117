import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { loopRefusal } from "../../src/gateway/loop-detection.js";
import { assertError } from "../helpers/assertions.js";
import { createKey, getKey } from "../helpers/fixtures.js";
import { type CallResult, type Harness, harness } from "../helpers/harness.js";
import { getResult } from "../helpers/http-client.js";
import { rawRequest, sendUntilClosed } from "../helpers/raw-http.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";
import { startUpstream } from "../helpers/upstream.js";

// keygate adds Via to what it forwards (RFC 9110 §7.6.3) and refuses, with 508 and before any check or charge, a
// request that has come through it already or through too many proxies.

interface Served {
  h: Harness;
  port: number;
  send(path: string, headers?: Record<string, string>): Promise<CallResult>;
}

async function served(t: Test, config: Record<string, unknown>, log?: { write(line: string): void }): Promise<Served> {
  const h = await harness(t, { config, ...(log ? { log } : {}) });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const port = (h.app.server.address() as AddressInfo).port;
  return {
    h,
    port,
    send: (path, headers = {}) => getResult(`http://127.0.0.1:${port}${path}`, headers),
  };
}

t.test("a route whose upstream is keygate itself answers 508 after one hop, with nothing charged", async (t) => {
  const lines: string[] = [];
  const s = await served(t, { logging: { level: "info", requests: true } }, { write: (line) => void lines.push(line) });
  const apiId = (await s.h.call("apis.createApi", { name: "loop" })).body.data.apiId as string;
  const { key, keyId } = await createKey(s.h, apiId, { credits: { remaining: 10 } });
  const created = await s.h.call("keygate.createRoute", {
    name: "self",
    match: { prefix: "/self" },
    upstream: `http://127.0.0.1:${s.port}`,
    policies: [{ name: "auth", enabled: true, keyauth: { keyspaces: [apiId] } }],
  });
  t.equal(created.status, 200, JSON.stringify(created.body));

  const answer = await s.send("/self/orders", { authorization: `Bearer ${key}` });
  assertError(t, answer, "err:keygate:gateway:loop_detected", /has come through this keygate already/);
  t.match(answer.headers.via, /^1\.1 keygate-[0-9a-f]+$/, "the answer passed back carries keygate's Via entry");
  t.equal((await getKey(s.h, keyId)).credits.remaining, 10, "the credit the first hop spent came back; the second spent none");
  const routed = lines.filter((line) => line.includes('"route":"self"'));
  t.equal(routed.length, 2, "the client's request and the one hop it made; no more");
});

t.test("Via names keygate's pseudonym both ways; a request naming it is refused before its key is asked for", async (t) => {
  const upstream = await startUpstream(t);
  const s = await served(t, {
    apis: [{ id: "api_via_loops", name: "via", workspaceId: "ws_test" }],
    routes: [{ name: "orders", match: { prefix: "/orders" }, upstream: upstream.url, apiId: "api_via_loops" }],
    gateway: { via: { pseudonym: "edge-7", maxHops: 3 } },
  });
  const { key } = await createKey(s.h, "api_via_loops");
  const bearer = { authorization: `Bearer ${key}` };

  const plain = await s.send("/orders/1", bearer);
  t.equal(plain.status, 200);
  t.equal(upstream.seen.at(-1)?.headers.via, "1.1 edge-7", "the upstream sees keygate's entry");
  t.equal(plain.headers.via, "1.1 edge-7", "so does the client, on the answer");

  const through = await s.send("/orders/2", { ...bearer, via: "1.1 cdn (Fastly, edge), 1.0 lb" });
  t.equal(through.status, 200, "proxies before keygate are fine");
  t.equal(upstream.seen.at(-1)?.headers.via, "1.1 cdn (Fastly, edge), 1.0 lb, 1.1 edge-7", "keygate's entry comes last");

  const seen = upstream.seen.length;
  const looped = await s.send("/orders/3", { via: "1.1 cdn, 1.1 EDGE-7 (keygate)" });
  assertError(t, looped, "err:keygate:gateway:loop_detected");
  t.equal(upstream.seen.length, seen, "nothing was forwarded");
  t.equal((await s.send("/orders/4", { ...bearer, via: "1.1 a, 1.1 b, 1.1 c" })).status, 200, "maxHops proxies before keygate pass");
  const long = await s.send("/orders/5", { ...bearer, via: "1.1 a, 1.1 b, 1.1 c, 1.1 d" });
  assertError(t, long, "err:keygate:gateway:loop_detected", /through 4 proxies .* more than the 3 keygate takes/);

  const upgrade = await sendUntilClosed(
    s.port,
    rawRequest("GET", "/orders/socket", [
      ["Host", "keygate.test"],
      ["Connection", "Upgrade"],
      ["Upgrade", "websocket"],
      ["Sec-WebSocket-Version", "13"],
      ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="],
      ["Via", "1.1 edge-7"],
    ]),
  );
  t.equal(upgrade.status, 508, "an upgrade that loops is refused too");
  t.match(JSON.parse(upgrade.body).error.type, /loop_detected$/);
  t.equal(upstream.seen.length, seen + 1, "only the request within maxHops reached the upstream");
  t.equal((await s.send("/v2/liveness", { via: "1.1 edge-7" })).status, 200, "the management API is no route: Via there is no loop");
});

t.test("instances of one deployment (one Redis, one prefix) share their pseudonym; another deployment's differs", async (t) => {
  const prefix = uniquePrefix(t, "via");
  const storage = (prefix: string) => ({ storage: { redis: { url: REDIS_URL, prefix } } });
  const upstream = await startUpstream(t);
  const b = await served(t, {
    ...storage(prefix),
    routes: [{ name: "b", match: { prefix: "/b" }, upstream: upstream.url, workspaceId: "ws_test" }],
  });
  const a = await served(t, {
    ...storage(prefix),
    routes: [{ name: "a", match: { prefix: "/b" }, upstream: `http://127.0.0.1:${b.port}`, workspaceId: "ws_test" }],
  });
  const other = await served(t, {
    ...storage(uniquePrefix(t, "via-other")),
    routes: [{ name: "c", match: { prefix: "/b" }, upstream: `http://127.0.0.1:${b.port}`, workspaceId: "ws_test" }],
  });
  assertError(t, await a.send("/b/x"), "err:keygate:gateway:loop_detected");
  t.equal(upstream.seen.length, 0, "a request from one instance to another of its deployment is a loop");
  const across = await other.send("/b/x");
  t.equal(across.status, 200, "one from another deployment is not");
  const entries = String(upstream.seen[0]?.headers.via).split(", ");
  t.equal(entries.length, 2);
  t.not(entries[0], entries[1], "two deployments, two pseudonyms");
});

t.test("Via is read as RFC 9110 writes it", async (t) => {
  t.equal(loopRefusal(undefined, "kg", 2), undefined);
  t.equal(loopRefusal("HTTP/1.1 proxy.example", "kg", 2), undefined);
  t.ok(loopRefusal("HTTP/1.1 kg", "kg", 2), "a protocol name may come with the version");
  t.ok(loopRefusal(["1.1 a", "2 kg"], "kg", 2), "several header lines are one list");
  t.equal(loopRefusal("1.1 a (comment, with commas, kg), 1.1 b", "kg", 2), undefined, "a comment is no entry, nor a name");
  t.ok(loopRefusal("1.1 a, 1.1 b, 1.1 c", "kg", 2), "more entries than maxHops");
  t.equal(loopRefusal(" , 1.1 a,, ", "kg", 1), undefined, "empty list elements are not counted");
});
