import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { DEFAULT_DOCS_URL, ERROR_CATALOGUE, type ErrorCode, errorTypeUrl } from "../../src/errors/catalogue.js";
import { harness, WORKSPACE } from "../helpers/harness.js";
import { type CapturedLog, captureLog, LEVELS } from "../helpers/log.js";
import { type RawResponse, sendUntilClosed } from "../helpers/raw-http.js";
import { startUpstream, type Upstream } from "../helpers/upstream.js";

// keygate has three doors: /v2 (Fastify), a plain request a gateway route takes (and the forward-auth door, which
// takes one without forwarding it), and a WebSocket upgrade. Each
// refusal made before a request is served must look the same through each of them: status, code and envelope,
// the request id in the header and the body, and one line in the log under that id (docs/architecture.md#edge-duties).

const API = "api_edge_parity";

type Door = "v2" | "plain" | "forward-auth" | "upgrade";
const DOORS: readonly Door[] = ["v2", "plain", "forward-auth", "upgrade"];

/**
 * The raw request through `door`, to `path` (the door's own when absent), with `headers` (Host included or not). At
 * the forward-auth door, `path` is the original request's, named by X-Original-URI.
 */
function requestThrough(door: Door, headers: string[], path?: string): string {
  if (door === "forward-auth") {
    return `GET /_keygate/auth HTTP/1.1\r\n${[...headers, `X-Original-URI: ${path ?? "/svc/orders"}`, "Connection: close"].join("\r\n")}\r\n\r\n`;
  }
  const target = path ?? (door === "v2" ? "/v2/liveness" : "/svc/orders");
  const upgrade =
    door === "upgrade"
      ? ["Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="]
      : ["Connection: close"];
  return `GET ${target} HTTP/1.1\r\n${[...headers, ...upgrade].join("\r\n")}\r\n\r\n`;
}

/** A path of the door's whose percent escape does not decode. */
function undecodablePath(door: Door): string {
  return door === "v2" ? "/v2/keys.verifyKey%zz" : "/svc/%E0%A4%A";
}

async function listening(t: Test) {
  const upstream = await startUpstream(t);
  const log = captureLog();
  const h = await harness(t, {
    log: log.stream,
    config: {
      logging: { level: "info", requests: true },
      apis: [{ id: API, name: "edge", workspaceId: WORKSPACE }],
      routes: [{ name: "svc", match: { prefix: "/svc" }, upstream: upstream.url, apiId: API }],
    },
  });
  return { h, upstream, log };
}

/** The refusal as every door must answer it, and its one log line at info under the request id. */
function assertRefusal(t: Test, door: Door, answer: RawResponse, code: ErrorCode, log: CapturedLog, upstream: Upstream): void {
  const entry = ERROR_CATALOGUE[code];
  t.equal(answer.status, entry.status, `${door}: status ${entry.status}`);
  t.match(answer.headers["content-type"], /^application\/json/, `${door}: in the envelope`);
  const body = JSON.parse(answer.body);
  t.equal(body.error.type, errorTypeUrl(code, DEFAULT_DOCS_URL), `${door}: ${code}`);
  t.equal(body.error.title, entry.title, `${door}: the catalogue's title`);
  t.match(body.meta.requestId, /^req_[1-9A-HJ-NP-Za-km-z]+$/, `${door}: meta.requestId is a req_ id`);
  t.equal(answer.headers["x-request-id"], body.meta.requestId, `${door}: x-request-id matches meta.requestId`);
  const lines = log.lines().filter((line) => line.requestId === body.meta.requestId && line.level === LEVELS.info);
  t.equal(lines.length, 1, `${door}: one line at info under the request id`);
  t.equal(upstream.seen.length, 0, `${door}: the upstream is never reached`);
}

t.test("each refusal at the door is the same through /v2, a gateway route and a WebSocket upgrade", async (t) => {
  const { h, upstream, log } = await listening(t);
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const port = (h.app.server.address() as AddressInfo).port;
  const refusals: { name: string; code: ErrorCode; request: (door: Door) => string }[] = [
    {
      name: "an HTTP/1.1 request without Host",
      code: "err:user:bad_request:missing_required_header",
      request: (door) => requestThrough(door, []),
    },
    {
      name: "an expectation other than 100-continue",
      code: "err:user:bad_request:expectation_failed",
      request: (door) => requestThrough(door, ["Host: keygate", "Expect: teapot"]),
    },
    {
      name: "a URL that does not decode",
      code: "err:user:bad_request:malformed_url",
      request: (door) => requestThrough(door, ["Host: keygate"], undecodablePath(door)),
    },
  ];
  for (const refusal of refusals) {
    await t.test(refusal.name, async (t) => {
      for (const door of DOORS) {
        assertRefusal(t, door, await sendUntilClosed(port, refusal.request(door)), refusal.code, log, upstream);
      }
    });
  }
});

t.test("while keygate closes, every door refuses with 503 shutting_down and closes the connection", async (t) => {
  const { h, upstream, log } = await listening(t);
  const answers = new Map<Door, RawResponse>();
  // Runs after keygate's own preClose hooks (every door now refuses) and before the server stops listening.
  h.app.addHook("preClose", async () => {
    const port = (h.app.server.address() as AddressInfo).port;
    for (const door of DOORS) answers.set(door, await sendUntilClosed(port, requestThrough(door, ["Host: keygate"])));
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  await h.app.close();
  for (const door of DOORS) {
    const answer = answers.get(door);
    if (!answer) return t.fail(`${door}: no answer`);
    assertRefusal(t, door, answer, "err:keygate:server:shutting_down", log, upstream);
    t.equal(answer.headers.connection, "close", `${door}: Connection: close`);
  }
});
