/**
 * HTTP/1.1 on a bare socket, for what a real client library would refuse to send or would hide: bad framing, odd or
 * repeated headers, pipelining, half-closed connections, header lines exactly as the server wrote them.
 */
import { connect, type Socket } from "node:net";
import { within } from "./wait.js";

/** One HTTP/1.1 response as it came off the wire. */
export interface RawResponse {
  status: number;
  /** Values by lower-case name; a repeated header's values joined with ", ". */
  headers: Record<string, string>;
  /** Every header line, in order, names spelled as sent (see headerValues). */
  headerLines: [string, string][];
  /** De-chunked, decoded as UTF-8; empty for HEAD, 101, 204 and 304. */
  body: string;
}

/** Every value of a header (name case-insensitive), in the order of its lines; empty when absent. */
export function headerValues(response: RawResponse, name: string): string[] {
  return response.headerLines.filter(([header]) => header.toLowerCase() === name.toLowerCase()).map(([, value]) => value);
}

/** The raw bytes of a request: request line, header lines exactly as given (duplicates and case kept), body. */
export function rawRequest(method: string, path: string, headers: [string, string][], body = ""): string {
  const lines = [`${method} ${path} HTTP/1.1`, ...headers.map(([name, value]) => `${name}: ${value}`)];
  return `${lines.join("\r\n")}\r\n\r\n${body}`;
}

/** A connection to a server, with everything it received and a promise settled when the server closes it. */
export interface RawConnection {
  socket: Socket;
  /** Everything received so far. */
  received(): Buffer;
  /** Resolves once the server has closed the connection (or it was reset), with everything received. */
  closed: Promise<Buffer>;
}

/** Opens a connection to a loopback port, for a test that writes and reads at its own pace. */
export async function openConnection(port: number): Promise<RawConnection> {
  const socket = connect(port, "127.0.0.1");
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  const chunks: Buffer[] = [];
  socket.on("data", (chunk: Buffer) => chunks.push(chunk));
  const closed = new Promise<Buffer>((resolve) => {
    // A reset (the server closing while the client still writes) ends the connection too.
    socket.on("error", () => {});
    socket.once("close", () => resolve(Buffer.concat(chunks)));
  });
  return { socket, received: () => Buffer.concat(chunks), closed };
}

export interface RawExchange {
  /** The complete final responses, in order (interim 1xx answers are skipped). */
  responses: RawResponse[];
  /** The server closed the connection (or reset it) before we did. */
  closedByServer: boolean;
  /** Bytes after the last complete response that do not form one (a response cut short, or garbage). */
  rest: Buffer;
}

export interface RawExchangeOptions {
  /** Stop once this many final responses are complete (the connection is then closed by us); without it, read until the server closes. */
  responses?: number;
  /** Methods of the requests in order, so that a HEAD answer is read without a body. */
  methods?: readonly string[];
  /** Half-close after writing: the server sees the end of the request stream (a truncated body stays truncated). */
  endAfterWrite?: boolean;
  /** Upper bound on waiting for the responses or the close, in ms (a bound, not an expectation). */
  waitMs?: number;
}

/**
 * Writes `request` (one or several requests' bytes) on a new connection and reads what comes back until the
 * responses asked for are complete, the server closes, or `waitMs` passes: whichever comes first. Never rejects:
 * the result says what came.
 */
export async function rawExchange(port: number, request: Buffer | string, options: RawExchangeOptions = {}): Promise<RawExchange> {
  const connection = await openConnection(port);
  const methods = options.methods ?? [];
  const enough = new Promise<void>((resolve) => {
    if (options.responses === undefined) return;
    const wanted = options.responses;
    connection.socket.on("data", () => {
      if (splitResponses(connection.received(), methods, false).responses.length >= wanted) resolve();
    });
  });
  connection.socket.write(request);
  if (options.endAfterWrite) connection.socket.end();
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    enough.then(() => "enough" as const),
    connection.closed.then(() => "closed" as const),
    new Promise<"late">((resolve) => (timer = setTimeout(resolve, options.waitMs ?? 5_000, "late"))),
  ]);
  clearTimeout(timer);
  connection.socket.destroy();
  const closedByServer = outcome === "closed";
  return { ...splitResponses(connection.received(), methods, closedByServer), closedByServer };
}

/**
 * The one response to `request` on a new connection that the server then closes (send `Connection: close`);
 * rejects when the server does not close it within `closeWithinMs`, or closed it without a response.
 */
export async function sendUntilClosed(port: number, request: string, closeWithinMs = 5_000): Promise<RawResponse> {
  const connection = await openConnection(port);
  connection.socket.write(request);
  try {
    return parseResponse(await within(closeWithinMs, "the server closing the connection", connection.closed));
  } finally {
    connection.socket.destroy();
  }
}

/** The first response in everything a closed connection received; throws when there is none. */
export function parseResponse(bytes: Buffer): RawResponse {
  const [first] = splitResponses(bytes, [], true).responses;
  if (!first) throw new Error(`no complete response in ${JSON.stringify(bytes.subarray(0, 200).toString("latin1"))}`);
  return first;
}

/** Every response of a closed connection that served several requests in turn; throws when bytes are left over. */
export function parseResponses(bytes: Buffer): RawResponse[] {
  const { responses, rest } = splitResponses(bytes, [], true);
  if (rest.length > 0)
    throw new Error(
      `bytes after ${responses.length} responses that are not one: ${JSON.stringify(rest.subarray(0, 200).toString("latin1"))}`,
    );
  return responses;
}

/**
 * The complete responses at the start of `data` (Content-Length, chunked, or delimited by the connection's end)
 * and what follows them. `methods` are the requests' methods in order (a HEAD answer has no body); with `atEnd`,
 * the connection has ended, so a response without a length ends with the data.
 */
function splitResponses(data: Buffer, methods: readonly string[], atEnd: boolean): { responses: RawResponse[]; rest: Buffer } {
  const responses: RawResponse[] = [];
  let offset = 0;
  for (;;) {
    const head = readHead(data, offset);
    if (!head) break;
    const { status, headers, headerLines, bodyStart } = head;
    // Interim answers (100 Continue) are skipped; 101 Switching Protocols is the last HTTP answer on its connection.
    if (status >= 100 && status < 200 && status !== 101) {
      offset = bodyStart;
      continue;
    }
    const method = methods[responses.length] ?? "GET";
    const body =
      method === "HEAD" || status === 101 || status === 204 || status === 304
        ? { bytes: Buffer.alloc(0), end: bodyStart }
        : readBody(data, bodyStart, headers, atEnd);
    if (!body) break;
    responses.push({ status, headers, headerLines, body: body.bytes.toString("utf8") });
    offset = body.end;
  }
  return { responses, rest: data.subarray(offset) };
}

/** The status line and header lines starting at `offset`, or undefined when they are not complete (or not HTTP). */
function readHead(
  data: Buffer,
  offset: number,
): { status: number; headers: Record<string, string>; headerLines: [string, string][]; bodyStart: number } | undefined {
  const headEnd = data.indexOf("\r\n\r\n", offset);
  if (headEnd === -1) return undefined;
  const [statusLine, ...lines] = data.subarray(offset, headEnd).toString("latin1").split("\r\n");
  const statusMatch = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? "");
  if (!statusMatch) return undefined;
  const headers: Record<string, string> = {};
  const headerLines: [string, string][] = [];
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon === -1) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    headerLines.push([name, value]);
    const key = name.toLowerCase();
    headers[key] = headers[key] === undefined ? value : `${headers[key]}, ${value}`;
  }
  return { status: Number(statusMatch[1]), headers, headerLines, bodyStart: headEnd + 4 };
}

/** The body starting at `start` and where it ends, or undefined when it is not complete yet. */
function readBody(
  data: Buffer,
  start: number,
  headers: Record<string, string>,
  atEnd: boolean,
): { bytes: Buffer; end: number } | undefined {
  if (/chunked/i.test(headers["transfer-encoding"] ?? "")) return readChunked(data, start);
  if (headers["content-length"] !== undefined) {
    const end = start + Number(headers["content-length"]);
    return data.length < end ? undefined : { bytes: data.subarray(start, end), end };
  }
  return atEnd ? { bytes: data.subarray(start), end: data.length } : undefined;
}

/** A chunked body starting at `start`, through its last chunk and any trailer fields, or undefined when incomplete. */
function readChunked(data: Buffer, start: number): { bytes: Buffer; end: number } | undefined {
  const chunks: Buffer[] = [];
  let position = start;
  for (;;) {
    const lineEnd = data.indexOf("\r\n", position);
    if (lineEnd === -1) return undefined;
    const size = parseInt(data.subarray(position, lineEnd).toString("latin1"), 16);
    if (Number.isNaN(size)) return undefined;
    if (size === 0) {
      // The last chunk, then any trailer fields, end with an empty line.
      const trailerEnd = data.indexOf("\r\n\r\n", lineEnd);
      if (trailerEnd === -1) return data.length < lineEnd + 4 ? undefined : { bytes: Buffer.concat(chunks), end: lineEnd + 4 };
      return { bytes: Buffer.concat(chunks), end: trailerEnd + 4 };
    }
    if (data.length < lineEnd + 2 + size + 2) return undefined;
    chunks.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    position = lineEnd + 2 + size + 2;
  }
}
