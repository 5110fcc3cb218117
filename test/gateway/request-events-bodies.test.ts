import { createHash } from "node:crypto";
import { createServer, request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import WebSocket from "ws";
import type { GatewayRequestEvent } from "../../src/domain/analytics/events.js";
import { CAPTURED_BODY_BYTES, TRUNCATED_MARKER } from "../../src/gateway/body-capture.js";
import { recordingAnalytics } from "../helpers/analytics.js";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

// The logging policy's requestBody and responseBody: the start of each body in the request's event, while the whole
// of both streams on untouched.

interface Digest {
  length: number;
  sha256: string;
}

const digest = (bytes: Buffer): Digest => ({ length: bytes.length, sha256: createHash("sha256").update(bytes).digest("hex") });

/** An upstream that streams every request's body back as its answer, and notes the digest of each body it got. */
async function startEchoUpstream(t: Test): Promise<{ url: string; received: Digest[] }> {
  const received: Digest[] = [];
  const server = createServer((request, response) => {
    const hash = createHash("sha256");
    let length = 0;
    request.on("data", (chunk: Buffer) => {
      hash.update(chunk);
      length += chunk.length;
    });
    request.on("end", () => received.push({ length, sha256: hash.digest("hex") }));
    response.writeHead(200, { "content-type": request.headers["content-type"] ?? "application/octet-stream" });
    request.pipe(response);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received };
}

interface Answer {
  status: number;
  requestId: string;
  body: Buffer;
}

t.test("a logging policy's requestBody and responseBody put the start of each body in the request's event", async (t) => {
  const events: GatewayRequestEvent[] = [];
  const echo = await startEchoUpstream(t);
  const sockets = await startUpstream(t);
  const h = await harness(t, { analytics: recordingAnalytics({ gatewayRequests: events }) });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const port = (h.app.server.address() as AddressInfo).port;
  const apiId = (await h.call("apis.createApi", { name: "bodies" })).body.data.apiId as string;
  const { key } = await createKey(h, apiId);
  const auth = { name: "auth", enabled: true, keyauth: { keyspaces: [apiId] } };
  const routes = [
    { name: "bodies", prefix: "/bodies", upstream: echo.url, logging: { requestBody: true, responseBody: true } },
    { name: "headers-only", prefix: "/headers-only", upstream: echo.url, logging: { requestHeaders: true } },
    { name: "plain", prefix: "/plain", upstream: echo.url },
    { name: "live", prefix: "/live", upstream: sockets.url, logging: { requestBody: true, responseBody: true } },
    { name: "down", prefix: "/down", upstream: "http://127.0.0.1:9", logging: { requestBody: true, responseBody: true } },
  ];
  for (const { name, prefix, upstream, logging } of routes) {
    const policies = logging ? [auth, { name: "log", enabled: true, logging }] : [auth];
    const created = await h.call("keygate.createRoute", { name, match: { prefix }, upstream, policies });
    t.equal(created.status, 200, JSON.stringify(created.body));
  }

  /** Sends `body` (in chunks of `chunk` bytes without a length when given, so chunked) and reads the whole answer. */
  const send = (method: string, path: string, body: Buffer | undefined, options: { chunk?: number; key?: string | null } = {}) =>
    new Promise<Answer>((resolve, reject) => {
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (options.key !== null) headers.authorization = `Bearer ${options.key ?? key}`;
      if (body && options.chunk === undefined) headers["content-length"] = String(body.length);
      const request = httpRequest({ host: "127.0.0.1", port, method, path, headers, agent: false }, (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () =>
          resolve({ status: response.statusCode ?? 0, requestId: String(response.headers["x-request-id"]), body: Buffer.concat(chunks) }),
        );
        response.on("error", reject);
      });
      request.on("error", reject);
      if (body && options.chunk !== undefined) {
        for (let at = 0; at < body.length; at += options.chunk) request.write(body.subarray(at, at + options.chunk));
        request.end();
      } else request.end(body);
    });
  /** The event of the request `answer` answered. */
  const eventOf = (answer: Answer) =>
    waitFor(`the event of ${answer.requestId}`, 5_000, () => events.find((event) => event.requestId === answer.requestId));

  await t.test("a POST with a JSON body: the event holds the body forwarded and the answer's", async (t) => {
    const json = Buffer.from(JSON.stringify({ order: 42, items: ["a", "b"], note: "ünïcødé 🔑" }));
    const answer = await send("POST", "/bodies/orders", json);
    t.equal(answer.status, 200);
    t.same(answer.body, json, "the upstream's answer: the body back");
    const event = await eventOf(answer);
    t.equal(event.requestBody, json.toString());
    t.equal(event.responseBody, json.toString());
    t.same(echo.received.at(-1), digest(json), "the upstream got the body");
  });

  await t.test("a 20 KiB body: the event keeps 8 KiB of each and marks the cut; the whole of both streams on", async (t) => {
    const big = Buffer.from(JSON.stringify({ data: "0123456789abcdef".repeat(1_280) }));
    t.ok(big.length > 20 * 1024);
    const expected = `${big.subarray(0, CAPTURED_BODY_BYTES).toString()}${TRUNCATED_MARKER}`;
    for (const chunk of [undefined, 1_000]) {
      const from = echo.received.length;
      const answer = await send("POST", "/bodies/big", big, chunk === undefined ? {} : { chunk });
      const how = chunk === undefined ? "with a length" : "chunked, in pieces of 1,000 bytes";
      t.equal(answer.status, 200, how);
      t.same(digest(answer.body), digest(big), `${how}: the client got the whole answer, byte for byte`);
      t.same(echo.received.slice(from), [digest(big)], `${how}: the upstream got the whole body, byte for byte`);
      const event = await eventOf(answer);
      t.equal(event.requestBody, expected, `${how}: the request's body, cut at ${CAPTURED_BODY_BYTES} bytes`);
      t.equal(event.responseBody, expected, `${how}: the answer's body, cut at ${CAPTURED_BODY_BYTES} bytes`);
    }
  });

  await t.test("bytes that are not UTF-8 are stored as U+FFFD; the upstream gets them as sent", async (t) => {
    const bytes = Buffer.from([0x7b, 0xff, 0xfe, 0x7d]);
    const answer = await send("POST", "/bodies/binary", bytes);
    t.same(answer.body, bytes);
    t.same(echo.received.at(-1), digest(bytes));
    const event = await eventOf(answer);
    t.same([event.requestBody, event.responseBody], ["{\uFFFD\uFFFD}", "{\uFFFD\uFFFD}"]);
  });

  await t.test("no request body, or none read: empty; keygate's own answer is the answer's body", async (t) => {
    const get = await eventOf(await send("GET", "/bodies/orders", undefined));
    t.same([get.responseStatus, get.requestBody, get.responseBody], [200, "", ""], "a GET: no body either way");
    const refused = await send("POST", "/bodies/orders", Buffer.from('{"order":1}'), { key: "sk_not_a_key" });
    t.equal(refused.status, 401);
    const event = await eventOf(refused);
    t.equal(event.requestBody, "", "refused before forwarding: the body was not read, and is not recorded");
    t.equal(event.responseBody, refused.body.toString(), "the refusal the client got");
    t.match(JSON.parse(event.responseBody), { error: { type: /invalid_key/ } });
  });

  await t.test("an upstream's 5xx held back while credits come back, and keygate's 502: the body the client got", async (t) => {
    const metered = await createKey(h, apiId, { credits: { remaining: 10 } });
    const held = await send("POST", "/live/status/503", Buffer.from('{"retry":true}'), { key: metered.key });
    t.same([held.status, held.body.toString()], [503, '{"status":503}']);
    const heldEvent = await eventOf(held);
    t.same([heldEvent.requestBody, heldEvent.responseBody], ['{"retry":true}', '{"status":503}']);
    const down = await send("POST", "/down/x", Buffer.from('{"order":2}'));
    t.equal(down.status, 502);
    const downEvent = await eventOf(down);
    t.equal(downEvent.requestBody, "", "no connection, so no byte of the body went upstream");
    t.equal(downEvent.responseBody, down.body.toString(), "the refusal in the envelope");
    t.match(JSON.parse(downEvent.responseBody), { error: { type: /upstream_unreachable/ } });
  });

  await t.test("a body an openapi policy read whole: captured from that buffer; one it refused: not forwarded, not recorded", async (t) => {
    const document = {
      openapi: "3.1.0",
      info: { title: "validated", version: "1" },
      paths: {
        "/validated/orders": {
          post: {
            requestBody: {
              required: true,
              content: {
                "application/json": {
                  schema: {
                    type: "object",
                    required: ["order"],
                    properties: { order: { type: "integer" }, padding: { type: "string" } },
                  },
                },
              },
            },
            responses: { "200": { description: "ok" } },
          },
        },
      },
    };
    const policies = [
      { name: "log", enabled: true, logging: { requestBody: true, responseBody: true } },
      { name: "validate", enabled: true, openapi: {} },
      auth,
    ];
    const created = await h.call("keygate.createRoute", {
      name: "validated",
      match: { prefix: "/validated" },
      upstream: echo.url,
      policies,
    });
    t.equal(created.status, 200, JSON.stringify(created.body));
    const uploaded = await h.call("keygate.setRouteOpenApi", { route: "validated", document: JSON.stringify(document) });
    t.equal(uploaded.status, 200, JSON.stringify(uploaded.body));

    const big = Buffer.from(JSON.stringify({ order: 1, padding: "p".repeat(20 * 1024) }));
    const from = echo.received.length;
    const valid = await send("POST", "/validated/orders", big);
    t.equal(valid.status, 200);
    t.same(digest(valid.body), digest(big), "the client got the whole answer");
    t.same(echo.received.slice(from), [digest(big)], "the upstream got the whole body, from the buffer the policy read");
    const validEvent = await eventOf(valid);
    const expected = `${big.subarray(0, CAPTURED_BODY_BYTES).toString()}${TRUNCATED_MARKER}`;
    t.same([validEvent.requestBody, validEvent.responseBody], [expected, expected]);

    const invalid = await send("POST", "/validated/orders", Buffer.from('{"order":"one"}'));
    t.equal(invalid.status, 400);
    t.equal(echo.received.length, from + 1, "not forwarded");
    const invalidEvent = await eventOf(invalid);
    t.equal(invalidEvent.requestBody, "", "refused before forwarding: not recorded, though the policy read it");
    t.equal(invalidEvent.responseBody, invalid.body.toString(), "the refusal the client got");
  });

  await t.test("routes that do not ask record no bodies", async (t) => {
    const json = Buffer.from('{"order":7}');
    for (const path of ["/headers-only/orders", "/plain/orders"]) {
      const answer = await send("POST", path, json);
      t.same(answer.body, json, `${path}: forwarded both ways`);
      const event = await eventOf(answer);
      t.same([event.requestBody, event.responseBody], ["", ""], `${path}: empty bodies`);
    }
    const headersOnly = await eventOf(await send("POST", "/headers-only/orders", json));
    t.ok(headersOnly.requestHeaders.includes("content-type: application/json"), "the headers the policy asks for");
  });

  await t.test("a WebSocket upgrade records no bodies", async (t) => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/live/x`, { headers: { authorization: `Bearer ${key}` } });
    const opened = new Promise((resolve) => socket.once("open", resolve));
    const requestId = await new Promise<string>((resolve, reject) => {
      socket.once("upgrade", (response) => resolve(String(response.headers["x-request-id"])));
      socket.once("error", reject);
    });
    await opened;
    const echoed = new Promise<string>((resolve) => socket.once("message", (data) => resolve(data.toString())));
    socket.send("hello");
    t.equal(await echoed, "echo:hello");
    const event = await waitFor("the upgrade's event", 5_000, () => events.find((each) => each.requestId === requestId));
    t.same([event.responseStatus, event.requestBody, event.responseBody], [101, "", ""]);
    socket.close();
    await new Promise((resolve) => socket.once("close", resolve));
  });
});
