import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import t, { type Test } from "tap";
import { DEFAULT_DOCS_URL, ERROR_CATALOGUE, type ErrorCode, errorTypeUrl } from "../../src/errors/catalogue.js";
import { harness, ROOT_KEY, WORKSPACE } from "../helpers/harness.js";
import { type CapturedLog, captureLog, LEVELS } from "../helpers/log.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Writes `bytes` on a fresh connection and reads until the server closes it. */
function exchange(port: number, bytes: string | Buffer): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    // The server may close while we are still writing; what it answered before is what counts.
    socket.on("error", () => {});
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const headEnd = text.indexOf("\r\n\r\n");
      if (headEnd === -1) return reject(new Error(`no HTTP answer, got ${JSON.stringify(text.slice(0, 200))}`));
      const [statusLine, ...headerLines] = text.slice(0, headEnd).split("\r\n");
      const headers: Record<string, string> = {};
      for (const line of headerLines) {
        const colon = line.indexOf(":");
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ status: Number((statusLine as string).split(" ")[1]), headers, body: text.slice(headEnd + 4) });
    });
    socket.write(bytes);
  });
}

async function listening(t: Test, log: CapturedLog) {
  const h = await harness(t, { log: log.stream, config: { logging: { level: "info", requests: true } } });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  return { h, port: (h.app.server.address() as AddressInfo).port };
}

/** The answer is the envelope for `code`, its request id in the header and the body alike. Returns the id. */
function assertEnvelope(t: Test, answer: RawAnswer, code: ErrorCode): string {
  const entry = ERROR_CATALOGUE[code];
  t.equal(answer.status, entry.status, `status ${entry.status}`);
  t.match(answer.headers["content-type"], /^application\/json/);
  const body = JSON.parse(answer.body);
  t.equal(body.error.type, errorTypeUrl(code, DEFAULT_DOCS_URL), code);
  t.equal(body.error.title, entry.title);
  t.equal(body.error.status, entry.status);
  t.match(body.meta.requestId, /^req_[1-9A-HJ-NP-Za-km-z]+$/, "meta.requestId is a req_ id");
  t.equal(answer.headers["x-request-id"], body.meta.requestId, "x-request-id matches meta.requestId");
  return body.meta.requestId as string;
}

t.test("oversized headers get 431 request_header_fields_too_large in the envelope, with a request id", async (t) => {
  const log = captureLog();
  const { port } = await listening(t, log);
  const oneHugeHeader = `GET /v2/liveness HTTP/1.1\r\nHost: keygate\r\nX-Huge: ${"a".repeat(1024 * 1024)}\r\n\r\n`;
  const manyHeaders = `GET /v2/liveness HTTP/1.1\r\nHost: keygate\r\n${Array.from({ length: 10_000 }, (_, i) => `X-H${i}: v\r\n`).join("")}\r\n`;
  for (const [name, bytes] of [
    ["a 1 MB header", oneHugeHeader],
    ["10,000 headers", manyHeaders],
  ] as const) {
    const id = assertEnvelope(t, await exchange(port, bytes), "err:user:bad_request:request_header_fields_too_large");
    const line = log.lines().find((candidate) => candidate.requestId === id);
    t.equal(line?.level, LEVELS.info, `${name}: logged under the request id, at info (request logging is on)`);
    t.equal(line?.code, "err:user:bad_request:request_header_fields_too_large");
  }
});

t.test("a URL that cannot be decoded gets 400 malformed_url in the envelope, with a request id", async (t) => {
  const log = captureLog();
  const { port } = await listening(t, log);
  for (const target of ["/%", "/v2/keys.verifyKey%zz", "/svc/%E0%A4%A", "/svc/a%FFb"]) {
    const answer = await exchange(port, `GET ${target} HTTP/1.1\r\nHost: keygate\r\nConnection: close\r\n\r\n`);
    const id = assertEnvelope(t, answer, "err:user:bad_request:malformed_url");
    t.same(JSON.parse(answer.body).error.errors, [], `${target}: errors[] is there, empty, as on every 400`);
    t.ok(
      log.lines().some((line) => line.requestId === id),
      "the request line carries the same id",
    );
  }
});

t.test("bytes that are not HTTP get 400 malformed_request in the envelope, with a request id", async (t) => {
  const log = captureLog();
  const { port } = await listening(t, log);
  for (const bytes of [
    "HELLO\r\n\r\n",
    "GET / HTTP/1.1\r\nBad Header Name: x\r\n\r\n",
    "POST /v2/keys.verifyKey HTTP/1.1\r\nHost: k\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
  ]) {
    const id = assertEnvelope(t, await exchange(port, bytes), "err:user:bad_request:malformed_request");
    t.ok(
      log.lines().some((line) => line.requestId === id && line.level === LEVELS.info),
      `${JSON.stringify(bytes.slice(0, 30))}: logged with its id`,
    );
  }
});

t.test("a client that aborts its /v2 body is logged at info as client_closed_request, not as an error", async (t) => {
  const log = captureLog();
  const { h, port } = await listening(t, log);
  let arrived = 0;
  h.app.server.on("request", () => arrived++);
  const aborts = 5;
  for (let i = 0; i < aborts; i++) {
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => {});
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write(
      `POST /v2/keys.verifyKey HTTP/1.1\r\nHost: keygate\r\nAuthorization: Bearer ${ROOT_KEY}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"key":"sk_`,
    );
    // The request is under way once the server has read its head; then the client goes.
    await waitFor(`request ${i + 1} reaches the server`, 10_000, () => (arrived > i ? true : undefined));
    socket.destroy();
  }
  const closed = () => log.lines().filter((line) => line.code === "err:user:bad_request:client_closed_request");
  await waitFor(`keygate logs ${aborts} closed requests`, 10_000, (because) => {
    because(`${closed().length} logged`);
    return closed().length >= aborts ? true : undefined;
  });
  t.equal(closed().length, aborts, "one line per aborted request");
  for (const line of closed()) {
    t.equal(line.level, LEVELS.info, "at info");
    t.equal(line.err, undefined, "without an error or stack");
    t.match(line.requestId, /^req_/);
  }
  t.same(
    log.lines().filter((line) => line.level >= LEVELS.warn),
    [],
    "nothing at warn or above",
  );
});

t.test("a client that aborts its upload through the gateway is client_closed_request at info, not an upstream failure", async (t) => {
  const upstream = await startUpstream(t);
  const log = captureLog();
  const h = await harness(t, {
    log: log.stream,
    config: {
      logging: { level: "info", requests: true },
      apis: [{ id: "api_aborted_uploads", name: "uploads", workspaceId: WORKSPACE }],
      routes: [{ name: "svc", match: { prefix: "/svc" }, upstream: upstream.url, apiId: "api_aborted_uploads" }],
    },
  });
  const key = (await h.call("keys.createKey", { apiId: "api_aborted_uploads" })).body.data.key as string;
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const socket = connect((h.app.server.address() as AddressInfo).port, "127.0.0.1");
  socket.on("error", () => {});
  await new Promise((resolve) => socket.once("connect", resolve));
  socket.write(
    `POST /svc/echo HTTP/1.1\r\nHost: keygate\r\nAuthorization: Bearer ${key}\r\nContent-Length: 100000\r\n\r\n${"x".repeat(1000)}`,
  );
  // The upload is under way once the upstream has some of it; then the client goes.
  await waitFor("the upstream receives some of the upload", 10_000, () => (upstream.progress.received > 0 ? true : undefined));
  socket.destroy();
  const closed = () => log.lines().filter((line) => line.code === "err:user:bad_request:client_closed_request");
  await waitFor("keygate logs the closed request", 10_000, () => (closed().length > 0 ? true : undefined));
  t.equal(closed().length, 1, "one line for the aborted upload");
  t.equal(closed()[0]?.level, LEVELS.info);
  t.same(
    log.lines().filter((line) => line.msg === "upstream failed" || line.msg === "refused a request that cannot be read"),
    [],
    "neither an upstream failure nor a second, made-up request",
  );
});

t.test("a request that arrives while keygate closes gets 503 shutting_down in the envelope, and the one in flight finishes", async (t) => {
  const upstream = await startUpstream(t);
  const log = captureLog();
  const h = await harness(t, {
    log: log.stream,
    config: {
      logging: { level: "info" },
      apis: [{ id: "api_closing", name: "closing", workspaceId: WORKSPACE }],
      routes: [{ name: "svc", match: { prefix: "/svc" }, upstream: upstream.url, apiId: "api_closing" }],
    },
  });
  const key = (await h.call("keys.createKey", { apiId: "api_closing" })).body.data.key as string;
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const socket = connect((h.app.server.address() as AddressInfo).port, "127.0.0.1");
  socket.on("error", () => {});
  let received = "";
  socket.on("data", (chunk: Buffer) => (received += chunk.toString()));
  const ended = new Promise((resolve) => socket.once("close", resolve));
  await new Promise((resolve) => socket.once("connect", resolve));
  // Two requests on one connection: the first is in flight when the close begins, the second comes after.
  const request = (path: string) => `GET ${path} HTTP/1.1\r\nHost: keygate\r\nAuthorization: Bearer ${key}\r\n\r\n`;
  socket.write(request("/svc/slow/1000"));
  await waitFor("the upstream has the first request", 10_000, () =>
    upstream.seen.some((seen) => seen.url === "/svc/slow/1000") ? true : undefined,
  );
  const closed = h.app.close();
  // The server stops listening after keygate's close hooks ran.
  await waitFor("the server stops listening", 10_000, () => (h.app.server.listening ? undefined : true));
  socket.write(request("/v2/liveness"));
  await ended;
  await closed;

  const answers = received.split(/(?=HTTP\/1\.1 )/);
  t.equal(answers.length, 2, "two answers");
  t.match(answers[0], /^HTTP\/1\.1 200 /, "the request in flight is answered");
  const [head, body] = (answers[1] as string).split("\r\n\r\n") as [string, string];
  t.match(head, /^HTTP\/1\.1 503 /);
  t.match(head, /\r\nconnection: close/i);
  const requestId = /\r\nx-request-id: (\S+)/i.exec(head)?.[1];
  t.equal(JSON.parse(body).meta.requestId, requestId, "with its request id in the header and the body");
  t.equal(JSON.parse(body).error.type, errorTypeUrl("err:keygate:server:shutting_down", DEFAULT_DOCS_URL));
  t.equal(log.lines().find((line) => line.requestId === requestId)?.level, LEVELS.warn, "logged at warn like every 503");
});
