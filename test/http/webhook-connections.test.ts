import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { HttpWebhookSender } from "../../src/http/webhook-sender.js";

// Webhook attempts to one endpoint reuse a keep-alive connection instead of a new TCP (and TLS) handshake each.

/** An endpoint on loopback that counts the connections it accepts and the requests it answers with `status`. */
async function endpoint(t: Test, answer: { status: number; body: string }) {
  let connections = 0;
  let requests = 0;
  const ports: number[] = [];
  const server = createServer((request, response) => {
    requests++;
    ports.push(request.socket.remotePort as number);
    request.resume();
    request.on("end", () => response.writeHead(answer.status).end(answer.body));
  });
  server.on("connection", () => connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    counts: () => ({ connections, requests }),
    /** The client port of each request's connection, in order. */
    ports,
  };
}

const attempt = (url: string, n: number) => ({
  url,
  id: `msg_${n}`,
  timestamp: 1,
  payload: "{}",
  secrets: [`whsec_${Buffer.alloc(32, 7).toString("base64")}`],
});

t.test("attempts to one endpoint share one connection; another endpoint has its own", async (t) => {
  const sender = new HttpWebhookSender({ timeoutMs: 5_000, maxResponseBytes: 100, allowPrivateAddresses: true });
  t.teardown(() => sender.close());
  const answer = { status: 204, body: "" };
  const a = await endpoint(t, answer);
  const b = await endpoint(t, { status: 200, body: "ok" });
  // undici may open a second connection for an attempt that follows the one before at once, before it has marked
  // the first connection free; from then on the two are reused. Without reuse there would be one per attempt.
  for (let n = 0; n < 10; n++) t.match(await sender.send(attempt(a.url, n)), { ok: true, status: 204 });
  const reused = a.counts();
  t.equal(reused.requests, 10);
  t.ok(reused.connections <= 2, `ten attempts over ${reused.connections} connection(s)`);
  answer.status = 503;
  answer.body = "down";
  t.same(await sender.send(attempt(a.url, 10)), { ok: false, status: 503, error: "answered 503: down" });
  t.same(a.counts(), { connections: reused.connections, requests: 11 }, "a failed answer read whole leaves its connection for the next");
  for (let n = 0; n < 5; n++) t.match(await sender.send(attempt(b.url, n)), { ok: true, status: 200 });
  t.equal(b.counts().requests, 5);
  t.ok(b.counts().connections <= 2, "the other endpoint has connections of its own, reused too");
  t.same(a.counts(), { connections: reused.connections, requests: 11 }, "the first endpoint saw none of them");
});

t.test("an answer longer than maxResponseBytes is cut short, and its connection is not used again", async (t) => {
  const sender = new HttpWebhookSender({ timeoutMs: 5_000, maxResponseBytes: 100, allowPrivateAddresses: true });
  t.teardown(() => sender.close());
  const answer = { status: 500, body: "x".repeat(1_000_000) };
  const a = await endpoint(t, answer);
  const failed = await sender.send(attempt(a.url, 1));
  t.match(failed, { ok: false, status: 500 });
  t.equal(failed.error, `answered 500: ${"x".repeat(100)}`, "the error keeps the first 100 bytes");
  answer.status = 204;
  answer.body = "";
  t.match(await sender.send(attempt(a.url, 2)), { ok: true, status: 204 });
  t.equal(a.ports.length, 2);
  t.not(a.ports[1], a.ports[0], "the next attempt goes over another connection than the one left mid-answer");
});

t.test("with private addresses refused, no connection is made to one, by address or by name", async (t) => {
  const sender = new HttpWebhookSender({ timeoutMs: 5_000, maxResponseBytes: 100, allowPrivateAddresses: false });
  t.teardown(() => sender.close());
  const a = await endpoint(t, { status: 204, body: "" });
  t.same(await sender.send(attempt(a.url, 1)), { ok: false, error: "refused: 127.0.0.1 is a private address" });
  const byName = await sender.send(attempt(a.url.replace("127.0.0.1", "localhost"), 2));
  t.match(byName, { ok: false, error: /^refused: localhost resolves to (127\.0\.0\.1|::1), a private address$/ });
  t.same(a.counts(), { connections: 0, requests: 0 });
});
