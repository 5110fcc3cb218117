import { createHash } from "node:crypto";
import type { AddressInfo } from "node:net";
import t from "tap";
import { createKey } from "../helpers/fixtures.js";
import { harness, ROOT_KEY } from "../helpers/harness.js";
import {
  headerValues,
  openConnection,
  parseResponse,
  parseResponses,
  type RawConnection,
  type RawResponse,
  rawRequest,
} from "../helpers/raw-http.js";
import { startUpstream } from "../helpers/upstream.js";
import { within } from "../helpers/wait.js";

const API = "api_slow_requests";

/** Writes `text` one byte every `everyMs` until it is all sent or the server closes the connection. */
function trickle(connection: RawConnection, text: string, everyMs: number): void {
  let sent = 0;
  const timer = setInterval(() => {
    if (sent >= text.length || connection.socket.destroyed) return clearInterval(timer);
    connection.socket.write(text[sent++] as string);
  }, everyMs);
  void connection.closed.then(() => clearInterval(timer));
}

t.test("slow clients: /v2 and header deadlines, and the gateway's streaming uploads", async (t) => {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    config: {
      // Tiny deadlines, so that slow clients are cut off within the test's bounded waits.
      server: { requestTimeoutMs: 300, headersTimeoutMs: 300 },
      apis: [{ id: API, name: "slow-requests", workspaceId: "ws_test" }],
      routes: [{ name: "svc", match: { prefix: "/svc" }, upstream: upstream.url, apiId: API }],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const port = (h.app.server.address() as AddressInfo).port;
  const { key } = await createKey(h, API);

  await t.test(
    "a /v2 body trickled slower than server.requestTimeoutMs gets 408 in the envelope, then the connection closes",
    async (t) => {
      const body = JSON.stringify({ key: "sk_".padEnd(60, "x") });
      const connection = await openConnection(port);
      const head: [string, string][] = [
        ["Host", "keygate.test"],
        ["Authorization", `Bearer ${ROOT_KEY}`],
        ["Content-Type", "application/json"],
        ["Content-Length", String(body.length)],
      ];
      connection.socket.write(rawRequest("POST", "/v2/keys.verifyKey", head));
      trickle(connection, body, 50);
      const response = parseResponse(await within(5_000, "the connection closing", connection.closed));
      t.equal(response.status, 408);
      const envelope = JSON.parse(response.body);
      t.equal(envelope.error.type.split("/").pop(), "request_timeout");
      t.equal(envelope.error.status, 408);
      t.match(envelope.error.detail, /300 ms/);
      t.same(headerValues(response, "x-request-id"), [envelope.meta.requestId]);
      t.same(headerValues(response, "connection"), ["close"]);
    },
  );

  await t.test("/v2 bodies that arrive in time are answered as usual, on a connection that stays open", async (t) => {
    const body = JSON.stringify({ key });
    const head: [string, string][] = [
      ["Host", "keygate.test"],
      ["Authorization", `Bearer ${ROOT_KEY}`],
      ["Content-Type", "application/json"],
      ["Content-Length", String(body.length)],
    ];
    const connection = await openConnection(port);
    connection.socket.write(
      rawRequest("POST", "/v2/keys.verifyKey", head, body) +
        rawRequest("POST", "/v2/keys.verifyKey", [...head, ["Connection", "close"]], body),
    );
    const responses = parseResponses(await within(5_000, "two answers, then the close asked for", connection.closed));
    t.same(
      responses.map((response) => response.status),
      [200, 200],
    );
    t.same(
      responses.map((response) => JSON.parse(response.body).data.valid),
      [true, true],
    );
    t.same(headerValues(responses[0] as RawResponse, "connection"), ["keep-alive"]);
  });

  await t.test("an answer given before the body has arrived closes the connection, on /v2 and on the gateway", async (t) => {
    for (const [path, auth] of [
      ["/v2/keys.verifyKey", "Bearer root_not_a_real_key"],
      ["/svc/upload", "Bearer sk_not_a_real_key"],
    ] as const) {
      const connection = await openConnection(port);
      connection.socket.write(
        rawRequest(
          "POST",
          path,
          [
            ["Host", "keygate.test"],
            ["Authorization", auth],
            ["Content-Type", "application/json"],
            ["Content-Length", "100000"],
          ],
          "{",
        ),
      );
      trickle(connection, "x".repeat(100_000), 50);
      const response = parseResponse(await within(5_000, `${path}: the connection closing`, connection.closed));
      t.equal(response.status, 401, `${path}: refused at once`);
      t.same(
        headerValues(response, "connection"),
        ["close"],
        `${path}: and closed, not left reading the rest of the body at the client's pace`,
      );
    }
  });

  await t.test("a gateway upload trickled for longer than the /v2 deadline reaches the upstream whole", async (t) => {
    const chunks = Array.from({ length: 12 }, (_, i) => `chunk ${i} `.repeat(100));
    const whole = chunks.join("");
    const connection = await openConnection(port);
    connection.socket.write(
      rawRequest("POST", "/svc/echo", [
        ["Host", "keygate.test"],
        ["Authorization", `Bearer ${key}`],
        ["Connection", "close"],
        ["Transfer-Encoding", "chunked"],
      ]),
    );
    // 12 chunks 100 ms apart: about 1.2 s, four times the /v2 deadline.
    for (const chunk of chunks) {
      connection.socket.write(`${Buffer.byteLength(chunk).toString(16)}\r\n${chunk}\r\n`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    connection.socket.write("0\r\n\r\n");
    const response = parseResponse(await within(5_000, "the answer", connection.closed));
    t.equal(response.status, 200);
    t.same(JSON.parse(response.body), { length: whole.length, sha256: createHash("sha256").update(whole).digest("hex") });
  });

  await t.test("headers trickled slower than server.headersTimeoutMs get 408, then the connection closes", async (t) => {
    const connection = await openConnection(port);
    connection.socket.write("GET /v2/liveness HTTP/1.1\r\nHost: keygate.test\r\n");
    trickle(connection, "X-Slow: ".padEnd(200, "y"), 50);
    const response = parseResponse(await within(5_000, "the connection closing", connection.closed));
    t.equal(response.status, 408);
  });
});
