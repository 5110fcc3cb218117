import type { AddressInfo } from "node:net";
import { createServer, type Socket } from "node:net";
import t from "tap";
import { createKey, getKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { captureLog } from "../helpers/log.js";

const API = "api_upstream_resets";

/**
 * An upstream that reads a request whole (its head, and a body of Content-Length bytes) and then resets the
 * connection without answering. Counts the bodies it read.
 */
async function resettingUpstream(t: { teardown(fn: () => unknown): void }) {
  const bodies: number[] = [];
  const server = createServer((socket: Socket) => {
    let received = Buffer.alloc(0);
    socket.on("error", () => {});
    socket.on("data", (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const headEnd = received.indexOf("\r\n\r\n");
      if (headEnd === -1) return;
      const length = Number(/content-length: *(\d+)/i.exec(received.subarray(0, headEnd).toString())?.[1] ?? 0);
      if (received.length - headEnd - 4 < length) return;
      bodies.push(length);
      socket.resetAndDestroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies };
}

t.test(
  "an upstream that reads a whole POST body and resets the connection is answered 502, not taken for a client that left",
  async (t) => {
    const upstream = await resettingUpstream(t);
    const log = captureLog();
    const h = await harness(t, {
      log: log.stream,
      config: {
        logging: { level: "info" },
        apis: [{ id: API, name: "resets", workspaceId: "ws_test" }],
        routes: [{ name: "resets", match: { prefix: "/resets" }, upstream: upstream.url, apiId: API, credits: { cost: 1 } }],
      },
    });
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
    const { key, keyId } = await createKey(h, API, { credits: { remaining: 10 } });

    for (const method of ["POST", "GET"]) {
      const response = await fetch(`${base}/resets/x`, {
        method,
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        ...(method === "POST" ? { body: JSON.stringify({ order: 7, lines: "x".repeat(10_000) }) } : {}),
      });
      const body = (await response.json()) as { error: { type: string } };
      t.equal(response.status, 502, `${method}: 502`);
      t.match(body.error.type, /upstream_unreachable$/, `${method}: upstream_unreachable in the envelope`);
    }
    t.equal(upstream.bodies.length, 2, "the upstream read both requests");
    t.equal((await getKey(h, keyId)).credits.remaining, 10, "the credits came back, as for any upstream failure");
    const lines = log.lines();
    t.equal(lines.filter((line) => line.code === "err:user:bad_request:client_closed_request").length, 0, "no client is said to have left");
    t.equal(lines.filter((line) => line.msg === "upstream failed").length, 2, "the upstream's failure is logged, for each");
  },
);
