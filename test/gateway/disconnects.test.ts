import { type AddressInfo, connect } from "node:net";
import t from "tap";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { captureLog } from "../helpers/log.js";
import { openConnection, parseResponses, rawRequest } from "../helpers/raw-http.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

const API = "api_disconnects";

t.test("a client that goes away mid-stream frees the upstream connection it was using", async (t) => {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    config: {
      apis: [{ id: API, name: "disconnects", workspaceId: "ws_test" }],
      routes: [
        { name: "svc", match: { prefix: "/svc" }, upstream: upstream.url, apiId: API },
        { name: "read-only", match: { prefix: "/read", methods: ["GET"] }, upstream: upstream.url, apiId: API },
      ],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const port = (h.app.server.address() as AddressInfo).port;
  const { key } = await createKey(h, API);
  const upstreamConnections = () =>
    new Promise<number>((resolve, reject) => upstream.server.getConnections((error, count) => (error ? reject(error) : resolve(count))));

  await t.test("while the answer streams down", async (t) => {
    const size = 512 * 1024 * 1024;
    const socket = connect(port, "127.0.0.1");
    let received = 0;
    socket.on("data", (chunk: Buffer) => {
      received += chunk.length;
    });
    socket.write(`GET /svc/bytes/${size} HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer ${key}\r\n\r\n`);
    await waitFor("the answer streaming", 10_000, () => (received > 1024 * 1024 ? true : undefined));
    t.equal(await upstreamConnections(), 1, "one upstream connection carries the stream");
    socket.destroy();
    await waitFor("the upstream connection closed", 10_000, async () => ((await upstreamConnections()) === 0 ? true : undefined));
    t.ok(upstream.progress.sent < size, "the upstream stopped sending before the end");
  });

  await t.test("while the request body streams up", async (t) => {
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => {});
    const before = upstream.progress.received;
    socket.write(
      `POST /svc/echo HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer ${key}\r\nContent-Length: ${64 * 1024 * 1024}\r\n\r\n`,
    );
    const chunk = Buffer.alloc(256 * 1024, 1);
    for (let i = 0; i < 8; i++) socket.write(chunk);
    await waitFor("the upload reaching the upstream", 10_000, () => (upstream.progress.received - before > 512 * 1024 ? true : undefined));
    socket.destroy();
    await waitFor("the upstream connection closed", 10_000, async () => ((await upstreamConnections()) === 0 ? true : undefined));
    const response = await fetch(`http://127.0.0.1:${port}/svc/after`, { headers: { authorization: `Bearer ${key}` } });
    t.equal(response.status, 200, "the next request is forwarded as usual");
  });

  await t.test("before the upstream answers: the upstream call is aborted, and a whole request's credits stay spent", async (t) => {
    const { key: paying, keyId } = await createKey(h, API, { credits: { remaining: 10 } });
    const seenBefore = upstream.seen.length;
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => {});
    socket.write(`GET /svc/slow/600000 HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer ${paying}\r\n\r\n`);
    await waitFor("the request at the upstream", 10_000, () => (upstream.seen.length > seenBefore ? true : undefined));
    t.equal(await upstreamConnections(), 1, "the upstream holds the request");
    socket.destroy();
    await waitFor("the upstream connection closed", 10_000, async () => ((await upstreamConnections()) === 0 ? true : undefined));
    const remaining = (await h.call("keys.getKey", { keyId })).body.data.credits.remaining;
    t.equal(remaining, 9, "the upstream had the whole request and may have acted on it: no refund");
  });

  await t.test("gone while its key is verified: nothing reaches the upstream, and the credits come back", async (t) => {
    const { key: paying, keyId } = await createKey(h, API, { credits: { remaining: 10 } });
    const verification = h.app.services.verification;
    const verify = verification.verify;
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let verified = false;
    // The verification is decided (a credit spent) and then held until the client has gone.
    verification.verify = async (request) => {
      const decided = await verify.call(verification, request);
      verified = true;
      await released;
      return decided;
    };
    t.teardown(() => {
      verification.verify = verify;
    });
    const seenBefore = upstream.seen.length;
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => {});
    const closed = new Promise((resolve) => socket.once("close", resolve));
    socket.write(`GET /svc/held HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer ${paying}\r\n\r\n`);
    await waitFor("the verification decided", 10_000, () => (verified ? true : undefined));
    socket.destroy();
    await closed;
    release();
    const credits = async () => (await h.call("keys.getKey", { keyId })).body.data.credits.remaining as number;
    t.equal(await waitFor("the credit refunded", 10_000, async () => ((await credits()) === 10 ? 10 : undefined)), 10);
    t.equal(upstream.seen.length, seenBefore, "the upstream never got the request");
  });

  await t.test("a refusal answered at once to a request without a body keeps the connection for the next", async (t) => {
    const connection = await openConnection(port);
    const headers: [string, string][] = [
      ["Host", "gateway.test"],
      ["Authorization", `Bearer ${key}`],
    ];
    connection.socket.write(
      rawRequest("DELETE", "/read/x", headers) + rawRequest("GET", "/svc/a/../b", headers) + rawRequest("GET", "/svc/ok", headers),
    );
    const responses = await waitFor("three answers on one connection", 10_000, () => {
      const answers = parseResponses(connection.received());
      return answers.length === 3 ? answers : undefined;
    });
    t.same(
      responses.map((response) => response.status),
      [405, 400, 200],
    );
    t.notOk(connection.socket.destroyed, "still open");
    connection.socket.destroy();
  });
});

t.test(
  "requests pipelined on a connection the client closes: each is settled and logged, credits match what the upstream got",
  async (t) => {
    const upstream = await startUpstream(t);
    const log = captureLog();
    const h = await harness(t, {
      log: log.stream,
      config: {
        logging: { level: "info", requests: true },
        apis: [{ id: API, name: "disconnects", workspaceId: "ws_test" }],
        routes: [{ name: "svc", match: { prefix: "/svc" }, upstream: upstream.url, apiId: API }],
      },
    });
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const port = (h.app.server.address() as AddressInfo).port;
    const { key, keyId } = await createKey(h, API, { credits: { remaining: 10 } });
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => {});
    const headers: [string, string][] = [
      ["Host", "gateway.test"],
      ["Authorization", `Bearer ${key}`],
    ];
    // Node hands the gateway the second request while the first awaits its answer; the second's answer is queued.
    socket.write(
      rawRequest("GET", "/svc/slow/600000", headers) + rawRequest("POST", "/svc/slow/200", [...headers, ["Content-Length", "4"]], "body"),
    );
    await waitFor("both requests at the upstream", 10_000, () => (upstream.seen.length === 2 ? true : undefined));
    socket.destroy();
    const logged = await waitFor("a request line for each", 10_000, () => {
      const lines = log.lines().filter((line) => line.msg === "request" && String(line.url).startsWith("/svc/slow/"));
      return lines.length === 2 ? lines : undefined;
    });
    t.same(logged.map((line) => `${line.method} ${line.url}`).sort(), ["GET /svc/slow/600000", "POST /svc/slow/200"]);
    const remaining = (await h.call("keys.getKey", { keyId })).body.data.credits.remaining;
    t.equal(remaining, 8, "the upstream had both whole requests: no refund");
    const next = await fetch(`http://127.0.0.1:${port}/svc/after`, { headers: { authorization: `Bearer ${key}` } });
    t.equal(next.status, 200, "the next request is forwarded as usual");
  },
);
