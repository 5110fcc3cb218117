import { createHash } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import t from "tap";
import WebSocket from "ws";
import type { GatewayRequestEvent } from "../../src/domain/analytics/events.js";
import { recordingAnalytics } from "../helpers/analytics.js";
import { createKey } from "../helpers/fixtures.js";
import { harness, ROOT_KEY } from "../helpers/harness.js";
import { captureLog } from "../helpers/log.js";
import { type Answer, fixture, handshake, http2Call, http2Session, https11, SERIAL, TEST_CA } from "../helpers/tls.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor, within } from "../helpers/wait.js";

const API = "api_tls_test";

// Node warns (once per process) when an answer's head has a field HTTP/2 cannot carry, and drops the field.
const warnings: string[] = [];
process.on("warning", (warning) => warnings.push(`${warning.name}: ${warning.message}`));

t.test("with server.tls, one port serves the gateway, /v2 and the dashboard over HTTP/2 and HTTP/1.1 over TLS", async (t) => {
  const upstream = await startUpstream(t);
  // Sends a field HTTP/2 allows once twice, as an HTTP/1.1 upstream may.
  const twice = createServer((_request, response) => {
    response.writeHead(200, ["Content-Type", "text/plain", "Content-Type", "text/html", "X-Many", "a", "X-Many", "b"]).end("twice");
  });
  await new Promise<void>((resolve) => twice.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise((resolve) => twice.close(resolve)));
  // Tells how each upload it was sent ended: whole, or cut off.
  const uploads: string[] = [];
  const uploadsTo = createServer((request, response) => {
    let received = 0;
    request.on("data", (chunk: Buffer) => (received += chunk.length));
    request.once("end", () => {
      uploads.push(`whole: ${received}`);
      response.end();
    });
    request.once("close", () => {
      if (!request.complete) uploads.push("cut off");
    });
  });
  await new Promise<void>((resolve) => uploadsTo.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise((resolve) => uploadsTo.close(resolve)));
  const log = captureLog();
  const events: GatewayRequestEvent[] = [];
  const h = await harness(t, {
    log: log.stream,
    analytics: recordingAnalytics({ gatewayRequests: events }),
    config: {
      server: { tls: fixture(1) },
      logging: { level: "info", requests: true },
      apis: [{ id: API, name: "tls", workspaceId: "ws_test" }],
      routes: [
        { name: "svc", match: { prefix: "/svc" }, upstream: upstream.url, apiId: API, forward: { keyId: "x-keygate-key-id" } },
        {
          name: "by-query",
          match: { prefix: "/by-query" },
          upstream: upstream.url,
          apiId: API,
          key: { query: "api_key" },
          analytics: { headers: true },
        },
        {
          name: "uploads",
          match: { prefix: "/uploads" },
          upstream: `http://127.0.0.1:${(uploadsTo.address() as AddressInfo).port}`,
          apiId: API,
        },
        { name: "twice", match: { prefix: "/twice" }, upstream: `http://127.0.0.1:${(twice.address() as AddressInfo).port}`, apiId: API },
      ],
    },
  });
  const address = await h.app.listen({ port: 0, host: "127.0.0.1" });
  t.match(address, /^https:\/\//, "listen resolves to an https:// address");
  const port = (h.app.server.address() as AddressInfo).port;
  const base = `https://localhost:${port}`;
  const { key, keyId } = await createKey(h, API);
  const session = await http2Session(t, port);
  const https = https11(t);

  await t.test("ALPN picks h2 when the client offers it, http/1.1 otherwise; the certificate is server.tls.cert's", async (t) => {
    t.same(await handshake(port, ["h2", "http/1.1"]), { protocol: "h2", serial: SERIAL[1] });
    t.same(await handshake(port, ["http/1.1"]), { protocol: "http/1.1", serial: SERIAL[1] });
    t.same(await handshake(port, []), { protocol: false, serial: SERIAL[1] }, "no ALPN at all is HTTP/1.1");
  });

  // The same checks over each protocol.
  const protocols: [
    string,
    (method: string, path: string, options?: { headers?: Record<string, string>; body?: string | Buffer[] }) => Promise<Answer>,
  ][] = [
    ["HTTP/2", (method, path, options = {}) => http2Call(session, method, path, options)],
    [
      "HTTP/1.1 over TLS",
      (method, path, options = {}) =>
        https(`${base}${path}`, {
          method,
          headers: options.headers ?? {},
          ...(options.body === undefined ? {} : { body: Array.isArray(options.body) ? Buffer.concat(options.body) : options.body }),
        }),
    ],
  ];
  for (const [protocol, send] of protocols) {
    await t.test(`${protocol}: a verified key reaches the upstream, which is told the request came over https`, async (t) => {
      const answer = await send("GET", "/svc/things?x=1", { headers: { authorization: `Bearer ${key}` } });
      t.equal(answer.status, 200);
      t.match(answer.headers["x-request-id"], /^req_/);
      const seen = answer.json();
      t.equal(seen.method, "GET");
      t.equal(seen.url, "/svc/things?x=1");
      t.equal(seen.headers["x-forwarded-proto"], "https");
      t.equal(seen.headers["x-forwarded-host"], `localhost:${port}`, "the client's :authority (HTTP/2) or Host");
      t.equal(seen.headers["x-keygate-key-id"], keyId);
      t.equal(seen.headers.authorization, undefined, "the key stays at the gateway");
      t.notOk(
        Object.keys(seen.headers).some((name) => name.startsWith(":")),
        "no HTTP/2 pseudo-header reaches the upstream (it is sent HTTP/1.1)",
      );
    });

    await t.test(`${protocol}: a request without a key is refused 401 in the envelope`, async (t) => {
      const answer = await send("GET", "/svc/things");
      t.equal(answer.status, 401);
      const body = answer.json();
      t.equal(body.error.status, 401);
      t.match(body.meta.requestId, /^req_/);
      t.equal(answer.headers["x-request-id"], body.meta.requestId);
      t.not(answer.headers.connection, "close", "the connection stays open (HTTP/2 answers have no Connection header at all)");
    });

    await t.test(`${protocol}: a request body streams to the upstream whole`, async (t) => {
      const chunks = Array.from({ length: 16 }, (_, i) => Buffer.alloc(64 * 1024, i));
      const answer = await send("POST", "/svc/echo", { headers: { authorization: `Bearer ${key}` }, body: chunks });
      t.equal(answer.status, 200);
      const whole = Buffer.concat(chunks);
      t.same(answer.json(), { length: whole.length, sha256: createHash("sha256").update(whole).digest("hex") });
    });

    await t.test(`${protocol}: an upstream's hop-by-hop headers stop at keygate; the answer arrives whole`, async (t) => {
      const answer = await send("GET", "/svc/hop-by-hop", { headers: { authorization: `Bearer ${key}` } });
      t.equal(answer.status, 200);
      t.equal(answer.headers["x-end-to-end"], "kept");
      for (const name of ["upgrade", "proxy-connection", "proxy-authenticate", "x-upstream-hop", "x-upstream-hop-2", "trailer"]) {
        t.equal(answer.headers[name], undefined, `no ${name}`);
      }
      t.not(answer.headers["keep-alive"], "timeout=7, max=99", "not the upstream's Keep-Alive");
      t.ok(answer.json().headers, "the body");
    });

    await t.test(`${protocol}: an upstream's field sent twice that HTTP/2 allows once is answered, with its first value`, async (t) => {
      const answer = await send("GET", "/twice", { headers: { authorization: `Bearer ${key}` } });
      t.equal(answer.status, 200);
      t.equal(answer.text, "twice");
      if (protocol === "HTTP/2") {
        t.equal(answer.headers["content-type"], "text/plain");
        t.same(answer.headers["x-many"], "a, b", "a field allowed many times keeps every value");
      }
    });

    await t.test(`${protocol}: /v2 answers a call`, async (t) => {
      const answer = await send("POST", "/v2/keys.verifyKey", {
        headers: { "content-type": "application/json", authorization: `Bearer ${ROOT_KEY}` },
        body: JSON.stringify({ key }),
      });
      t.equal(answer.status, 200);
      t.equal(answer.json().data.valid, true);
    });

    await t.test(`${protocol}: the dashboard's page is served`, async (t) => {
      const answer = await send("GET", "/dashboard/");
      t.equal(answer.status, 200);
      t.match(answer.headers["content-type"], /text\/html/);
      t.match(answer.text, /<html/i);
    });
  }

  await t.test(
    "HTTP/2: a request's analytics event has its host from :authority, and no pseudo-header (:path holds the query)",
    async (t) => {
      const answer = await http2Call(session, "GET", `/by-query/x?api_key=${key}&b=1`, { headers: { "x-tenant": "acme" } });
      t.equal(answer.status, 200);
      const event = await waitFor("the event", 5_000, () => events.find((each) => each.route === "by-query"));
      t.match(event, {
        host: `localhost:${port}`,
        method: "GET",
        path: "/by-query/x",
        queryString: "api_key=REDACTED&b=1",
        responseStatus: 200,
      });
      t.ok(event.requestHeaders.includes("x-tenant: acme"));
      t.notOk(
        event.requestHeaders.some((line) => line.startsWith(":")),
        "no pseudo-header line",
      );
      t.notOk(JSON.stringify(event).includes(key), "the key is nowhere in the event");
    },
  );

  await t.test("HTTP/2: a refusal sent before the body has arrived ends that stream only; the connection serves on", async (t) => {
    const stream = session.request({ ":method": "POST", ":path": "/svc/echo" }, { endStream: false });
    stream.write(Buffer.alloc(64 * 1024));
    const status = await new Promise<number>((resolve) => stream.once("response", (headers) => resolve(Number(headers[":status"]))));
    t.equal(status, 401);
    stream.resume();
    await waitFor("the refused stream closed", 5_000, () => (stream.closed ? true : undefined));
    const next = await http2Call(session, "GET", "/svc/next", { headers: { authorization: `Bearer ${key}` } });
    t.equal(next.status, 200, "the same connection serves the next request");
  });

  /** Sends the head and a first chunk of a body that never ends; resolves with the answer's status once the stream closes. */
  const answeredEarly = async (path: string, headers: Record<string, string>) => {
    const stream = session.request({ ":method": "POST", ":path": path, ...headers }, { endStream: false });
    stream.write(Buffer.alloc(16 * 1024));
    const status = await new Promise<number>((resolve) => stream.once("response", (received) => resolve(Number(received[":status"]))));
    stream.resume();
    await waitFor("the stream closed", 5_000, () => (stream.closed ? true : undefined));
    return { status, rstCode: stream.rstCode };
  };

  await t.test("HTTP/2: an upstream's answer before the body has arrived closes that stream (NO_ERROR) once sent", async (t) => {
    const { status, rstCode } = await answeredEarly("/svc/status/202", { authorization: `Bearer ${key}` });
    t.equal(status, 202);
    t.equal(rstCode, 0, "RST_STREAM NO_ERROR: the rest of the body is not wanted");
    await waitFor("its access log line", 5_000, () =>
      log.lines().find((line) => line.msg === "request" && line.url === "/svc/status/202" && line.status === 202),
    );
    t.equal((await http2Call(session, "GET", "/svc/next", { headers: { authorization: `Bearer ${key}` } })).status, 200);
  });

  await t.test("HTTP/2: /v2's answer before the body has arrived (larger than bodyLimit) closes that stream only", async (t) => {
    const { status, rstCode } = await answeredEarly("/v2/keys.verifyKey", {
      "content-type": "application/json",
      "content-length": String(100 * 1024 * 1024),
      authorization: `Bearer ${ROOT_KEY}`,
    });
    t.equal(status, 413);
    t.equal(rstCode, 0);
    t.equal((await http2Call(session, "GET", "/v2/liveness")).status, 200, "the connection serves on");
  });

  await t.test("HTTP/2: a client that goes away mid-upload cuts the upstream's request off too", async (t) => {
    // Its own connection, closed abruptly: Node's client ends a stream's body (END_STREAM) before it resets it.
    const leaving = await http2Session(t, port);
    const stream = leaving.request({ ":method": "POST", ":path": "/uploads/x", authorization: `Bearer ${key}` }, { endStream: false });
    stream.on("error", () => {});
    stream.write(Buffer.alloc(32 * 1024));
    await new Promise((resolve) => setTimeout(resolve, 200));
    leaving.destroy();
    t.same(await waitFor("the upstream's request ended", 5_000, () => (uploads.length > 0 ? uploads : undefined)), ["cut off"]);
    const line = await waitFor("the access log line", 5_000, () =>
      log.lines().find((line) => line.msg === "request" && line.url === "/uploads/x"),
    );
    t.equal(line.status, 499, "logged as a request its client closed");
  });

  await t.test("HTTP/2: Expect: 100-continue gets its interim answer, then the request is served", async (t) => {
    const answer = await http2Call(session, "POST", "/svc/echo", {
      headers: { authorization: `Bearer ${key}`, expect: "100-continue" },
      body: [Buffer.from("hello")],
    });
    t.equal(answer.status, 200);
    t.equal(answer.json().length, 5);
  });

  await t.test("HTTP/2: an expectation other than 100-continue is refused 417 in the envelope, at the gateway and on /v2", async (t) => {
    for (const path of ["/svc/x", "/v2/liveness"]) {
      const answer = await http2Call(session, "GET", path, { headers: { authorization: `Bearer ${key}`, expect: "something-else" } });
      t.equal(answer.status, 417, path);
      t.match(answer.json(), { error: { status: 417 }, meta: { requestId: answer.headers["x-request-id"] } });
    }
  });

  await t.test("a WebSocket upgrade works over TLS (wss), on HTTP/1.1", async (t) => {
    const socket = new WebSocket(`wss://localhost:${port}/svc/feed`, { ca: TEST_CA, headers: { authorization: `Bearer ${key}` } });
    t.teardown(() => socket.terminate());
    await new Promise((resolve, reject) => {
      socket.once("open", resolve);
      socket.once("error", reject);
    });
    const reply = new Promise<string>((resolve) => socket.once("message", (data) => resolve(data.toString())));
    socket.send("over tls");
    t.equal(await reply, "echo:over tls");
    t.equal(upstream.seen.at(-1)?.headers["x-forwarded-proto"], "https");
    socket.close();
    await new Promise((resolve) => socket.once("close", resolve));
  });

  await t.test("every request has its access log line, HTTP/2 ones too", async (t) => {
    const lines = await waitFor("the access log lines", 5_000, () => {
      const found = log.lines().filter((line) => line.msg === "request" && line.face === "gateway" && line.route === "svc");
      return found.length >= 12 ? found : undefined;
    });
    t.ok(lines.every((line) => line.client === "127.0.0.1" || line.client === "::ffff:127.0.0.1"));
    t.same(warnings, [], "Node warned of no header HTTP/2 cannot carry");
  });

  await t.test("closing keygate ends an idle HTTP/2 connection (GOAWAY) rather than wait for its client", async (t) => {
    const idle = await http2Session(t, port);
    const ended = new Promise<void>((resolve) => idle.once("close", () => resolve()));
    await within(5_000, "keygate closed", h.app.close());
    await within(5_000, "the idle connection closed", ended);
    t.pass("closed, and the connection with it");
  });
});
