import { createHash } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer } from "ws";

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

export interface Upstream {
  url: string;
  server: Server;
  /** Every request the upstream received, in order. */
  seen: SeenRequest[];
  /**
   * Body bytes received by /echo and sent by /bytes so far (to see streams move while they are under way), and
   * whether /bytes is held back by its reader: its last write was not taken in whole and 'drain' has not come.
   */
  progress: { received: number; sent: number; stalled: boolean };
  close(): Promise<void>;
}

/**
 * The header lines /hop-by-hop answers with: hop-by-hop ones of every kind (two Connection lines, each naming a
 * header, in mixed case), and one end-to-end header. A proxy passes on only the last.
 */
export const HOP_BY_HOP_RESPONSE: readonly [string, string][] = [
  ["Connection", "keep-alive, X-Upstream-Hop"],
  ["connection", "x-upstream-hop-2"],
  ["X-Upstream-Hop", "named in the first Connection line"],
  ["X-Upstream-Hop-2", "named in the second Connection line"],
  ["Keep-Alive", "timeout=7, max=99"],
  ["Proxy-Authenticate", 'Basic realm="upstream"'],
  ["Proxy-Connection", "keep-alive"],
  ["Upgrade", "h2c"],
  ["Trailer", "X-Checksum"],
  ["X-End-To-End", "kept"],
];

interface Teardown {
  teardown(fn: () => unknown): void;
}

type Progress = Upstream["progress"];

/** Streams `count` bytes of 7s in 64 KiB chunks, as fast as the reader takes them. */
function streamBytes(response: ServerResponse, count: number, progress: Progress): void {
  let left = count;
  const chunk = Buffer.alloc(64 * 1024, 7);
  response.writeHead(200, { "content-type": "application/octet-stream" });
  const pump = () => {
    while (left > 0) {
      const piece = left >= chunk.length ? chunk : chunk.subarray(0, left);
      left -= piece.length;
      progress.sent += piece.length;
      if (!response.write(piece)) {
        progress.stalled = true;
        return void response.once("drain", () => {
          progress.stalled = false;
          pump();
        });
      }
    }
    response.end();
  };
  pump();
}

/** Reads the request body as it comes and answers its length and SHA-256. */
function echoDigest(request: IncomingMessage, response: ServerResponse, progress: Progress): void {
  const hash = createHash("sha256");
  let length = 0;
  request.on("data", (chunk: Buffer) => {
    hash.update(chunk);
    length += chunk.length;
    progress.received += chunk.length;
  });
  request.on("end", () => response.end(JSON.stringify({ length, sha256: hash.digest("hex") })));
}

/** Answers by path; see startUpstream. */
function answer(request: IncomingMessage, response: ServerResponse, progress: Progress): void {
  const url = request.url ?? "/";
  const status = /\/status\/(\d{3})/.exec(url);
  const slow = /\/slow\/(\d+)/.exec(url);
  const bytes = /\/bytes\/(\d+)/.exec(url);
  if (/\/echo(\/|\?|$)/.test(url)) {
    echoDigest(request, response, progress);
    return;
  }
  request.resume();
  if (status) {
    response.writeHead(Number(status[1]), { "content-type": "application/json" }).end(JSON.stringify({ status: Number(status[1]) }));
  } else if (slow) {
    const timer = setTimeout(() => response.writeHead(200).end("late"), Number(slow[1]));
    response.on("close", () => clearTimeout(timer));
  } else if (/\/hop-by-hop(\/|\?|$)/.test(url)) {
    response.writeHead(200, [...HOP_BY_HOP_RESPONSE.flat(), "content-type", "application/json"]);
    response.write(JSON.stringify({ headers: request.headers, rawHeaders: request.rawHeaders }));
    response.addTrailers({ "x-checksum": "abc" });
    response.end();
  } else if (bytes) {
    streamBytes(response, Number(bytes[1]), progress);
  } else {
    response
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify({ method: request.method, url, headers: request.headers }));
  }
}

/**
 * A real upstream on a loopback port. Paths (the segments may follow any prefix, e.g. /svc/echo):
 *  /status/<code>   answers that status
 *  /slow/<ms>       answers after <ms>
 *  /echo            reads the request body as it streams in and answers JSON { length, sha256 } of it
 *  /bytes/<n>       streams n bytes (in 64 KiB chunks), as fast as the reader takes them
 *  /hop-by-hop      200 JSON { headers, rawHeaders } of the request, sent back with every kind of hop-by-hop header
 *                   (see HOP_BY_HOP_RESPONSE) next to `X-End-To-End: kept`, chunked, with a trailer
 *  anything else    200 JSON { method, url, headers }
 * WebSocket upgrades are accepted on any path and echo every message, prefixed "echo:".
 */
export async function startUpstream(t: Teardown): Promise<Upstream> {
  const seen: SeenRequest[] = [];
  const progress: Progress = { received: 0, sent: 0, stalled: false };
  const server = createServer((request, response) => {
    seen.push({ method: request.method ?? "", url: request.url ?? "", headers: request.headers });
    answer(request, response, progress);
  });
  const sockets = new WebSocketServer({ noServer: true });
  server.on("upgrade", (request, socket, head) => {
    seen.push({ method: request.method ?? "", url: request.url ?? "", headers: request.headers });
    // Like an HTTP API that speaks no other protocol: an upgrade to anything but WebSocket is answered as a request.
    if (request.headers.upgrade?.toLowerCase() !== "websocket") {
      const body = JSON.stringify({ method: request.method, url: request.url, headers: request.headers });
      socket.end(
        `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
      return;
    }
    sockets.handleUpgrade(request, socket, head, (ws) => ws.on("message", (message) => ws.send(`echo:${message.toString()}`)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const close = () =>
    new Promise<void>((resolve) => {
      for (const client of sockets.clients) client.terminate();
      server.closeAllConnections();
      server.close(() => resolve());
    });
  t.teardown(close);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, seen, progress, close };
}
