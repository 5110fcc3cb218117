import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { Readable } from "node:stream";
import t from "tap";
import { startGatewayProcess } from "../helpers/process.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

/** Peak resident memory of a process so far, in bytes (Linux). */
function peakRss(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("VmHWM:"));
  return Number(/(\d+)/.exec(line ?? "")?.[1] ?? 0) * 1024;
}

const SIZE = 50 * 1024 * 1024;

t.test("keygate as a process streams 50 MB through both ways, chunk by chunk, never holding it whole", async (t) => {
  const upstream = await startUpstream(t);
  const gateway = await startGatewayProcess(t, { upstream: upstream.url, watchConfig: false });
  const pid = gateway.server.child.pid as number;
  const before = peakRss(pid);

  await t.test("an upload reaches the upstream while the client is still sending, whole and in order", async (t) => {
    // After 20 MB the client stops producing until the upstream has seen bytes. A gateway that buffered the whole
    // body before forwarding it would never forward any, and this would time out.
    const upload = createHash("sha256");
    const chunk = Buffer.alloc(256 * 1024, 3);
    let upstreamBytesWhileSending = 0;
    async function* body() {
      for (let sent = 0; sent < SIZE; sent += chunk.length) {
        if (sent === 20 * 1024 * 1024)
          upstreamBytesWhileSending = await waitFor("the upstream receiving bytes", 10_000, () => upstream.progress.received || undefined);
        upload.update(chunk);
        yield chunk;
      }
    }
    const uploaded = await fetch(`${gateway.server.baseUrl}/svc/echo`, {
      method: "POST",
      headers: { authorization: `Bearer ${gateway.key}`, "content-type": "application/octet-stream" },
      body: Readable.from(body()) as unknown as ReadableStream,
      duplex: "half",
    } as RequestInit);
    t.ok(
      upstreamBytesWhileSending > 0,
      `the upstream had ${(upstreamBytesWhileSending / 1024 / 1024).toFixed(1)} MB while the client was still sending`,
    );
    t.same(await uploaded.json(), { length: SIZE, sha256: upload.digest("hex") }, "and received every byte, in order");
  });

  await t.test("a download is held back while the client does not read, then arrives whole", async (t) => {
    const download = createHash("sha256");
    const response = await gateway.get(`/svc/bytes/${SIZE}`);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const firstChunk = await reader.read();
    // The client reads nothing more for now. Backpressure must reach the upstream: its writes stop being taken.
    let last = -1;
    const heldAt = await waitFor("the upstream held back (or done)", 10_000, () => {
      const { sent, stalled } = upstream.progress;
      const settled = sent === SIZE || (stalled && sent === last);
      last = sent;
      return settled ? sent : undefined;
    });
    // A gateway that read ahead of its client would go on taking the upstream's bytes whenever its event loop
    // turns: keygate serves other requests meanwhile, and the upstream is still where it was.
    for (let i = 0; i < 5; i++) t.equal((await gateway.get(`/svc/meanwhile/${i}`)).status, 200);
    t.ok(
      heldAt < SIZE && upstream.progress.sent === heldAt,
      `while the client paused, the upstream sent ${(heldAt / 1024 / 1024).toFixed(1)} of 50 MB and no more`,
    );

    let received = 0;
    for (let piece = firstChunk; !piece.done; piece = await reader.read()) {
      download.update(piece.value);
      received += piece.value.length;
    }
    t.equal(received, SIZE, "the client received every byte");
    const expected = createHash("sha256");
    const sevens = Buffer.alloc(1024 * 1024, 7);
    for (let hashed = 0; hashed < SIZE; hashed += sevens.length) expected.update(sevens);
    t.equal(download.digest("hex"), expected.digest("hex"), "and they are the upstream's");
  });

  t.comment(`keygate's peak memory grew by ${((peakRss(pid) - before) / 1024 / 1024).toFixed(1)} MB while 100 MB went through`);
  await gateway.server.stop();
});
