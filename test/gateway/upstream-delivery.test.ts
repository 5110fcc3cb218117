import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { PassThrough, Writable } from "node:stream";
import t from "tap";
import { UpstreamAbort, UpstreamClient } from "../../src/gateway/upstream-client.js";

/**
 * Whether an upstream "had the whole request" decides a credit refund (docs/gateway.md, step 5 of a request). keygate works it
 * out from its own request body and undici's documented handler API; these calls go through real undici to real
 * sockets, so an undici that changes what it calls when pins the change here.
 */

type Behaviour = (request: IncomingMessage, response: ServerResponse) => void;

interface Teardown {
  teardown(fn: () => unknown): void;
}

async function upstream(t: Teardown, behaviour: Behaviour): Promise<string> {
  const server = createServer(behaviour);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function client(t: Teardown): UpstreamClient {
  const upstreamClient = new UpstreamClient();
  t.teardown(() => upstreamClient.close());
  return upstreamClient;
}

/** Calls `origin` with `body`; resolves with how the call ended and what its signal says. */
async function call(upstreamClient: UpstreamClient, origin: string, method: string, body: PassThrough | Buffer | null) {
  const signal = new UpstreamAbort();
  let status = 0;
  const sink = () =>
    new Writable({
      write(_chunk, _encoding, callback) {
        callback();
      },
    });
  const outcome = await upstreamClient
    .call({ origin, path: "/", method, headers: {}, body, timeoutMs: 10_000, signal }, (statusCode) => {
      status = statusCode;
      return sink();
    })
    .then(
      () => "answered" as const,
      () => "failed" as const,
    );
  return { outcome, status, connected: signal.connected, sent: signal.sent };
}

t.test("an upstream that closes before reading the body did not have the request", async (t) => {
  const origin = await upstream(t, (request) => request.socket.destroy());
  const body = new PassThrough();
  body.write("the first part of a body whose end never comes");
  const result = await call(client(t), origin, "POST", body);
  t.equal(result.outcome, "failed");
  t.ok(result.connected, "undici had a connection for it");
  t.notOk(result.sent, "not had whole: its credits come back");
});

t.test("an upstream that reads the whole body and then fails had the request", async (t) => {
  const origin = await upstream(t, (request) => {
    request.resume();
    request.once("end", () => request.socket.destroy());
  });
  const body = new PassThrough();
  body.end("a whole body, ".repeat(5000));
  const result = await call(client(t), origin, "POST", body);
  t.equal(result.outcome, "failed");
  t.ok(result.sent, "had whole: the upstream may have acted on it");
});

t.test("an upstream that answers before reading the body did not have the request", async (t) => {
  const origin = await upstream(t, (_request, response) => response.end("early"));
  const body = new PassThrough();
  body.write("a body still arriving");
  const result = await call(client(t), origin, "POST", body);
  t.equal(result.outcome, "answered");
  t.equal(result.status, 200);
  t.notOk(result.sent, "the rest of the body never went");
  body.end();
});

t.test("a request without a body, or with one held whole, is had once undici starts it", async (t) => {
  let requests = 0;
  const origin = await upstream(t, (request) => {
    requests += 1;
    request.resume();
    request.once("end", () => request.socket.destroy());
  });
  const upstreamClient = client(t);
  for (const [method, body] of [
    ["GET", null],
    ["POST", Buffer.from('{"order":7}')],
  ] as const) {
    const result = await call(upstreamClient, origin, method, body);
    t.equal(result.outcome, "failed", `${method}: failed`);
    t.ok(result.sent, `${method}: had whole`);
  }
  t.equal(requests, 2, "both reached the upstream");
});

t.test("a call that never found a connection was not started", async (t) => {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  const result = await call(client(t), `http://127.0.0.1:${port}`, "GET", null);
  t.equal(result.outcome, "failed");
  t.notOk(result.connected, "nothing left keygate");
  t.notOk(result.sent);
});
