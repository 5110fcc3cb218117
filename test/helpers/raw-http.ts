import { connect, type Socket } from "node:net";

/** An HTTP/1.1 answer as it came off the wire: header lines in order and as spelled, the body de-chunked. */
export interface RawResponse {
  status: number;
  /** Every header line, in order, names as sent. */
  headers: [string, string][];
  body: string;
}

/** Every value of a header (case-insensitive), in order; empty when absent. */
export function headerValues(response: RawResponse, name: string): string[] {
  return response.headers.filter(([header]) => header.toLowerCase() === name.toLowerCase()).map(([, value]) => value);
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

/** Resolves with `promise`, or rejects after `ms` with `what` in the message: a bounded wait for a positive signal. */
export function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * Sends `request` on a new connection and reads until the server closes it; rejects when it does not close within
 * `closeWithinMs` (send `Connection: close` to be answered and closed).
 */
export async function exchange(port: number, request: string, closeWithinMs = 5_000): Promise<RawResponse> {
  const connection = await openConnection(port);
  connection.socket.write(request);
  const bytes = await within(closeWithinMs, "the server closing the connection", connection.closed);
  return parseResponse(bytes);
}

/**
 * Parses one HTTP/1.1 response (Content-Length, chunked, or delimited by the connection's end), after any interim
 * responses (100 Continue).
 */
export function parseResponse(bytes: Buffer): RawResponse {
  return parseNext(bytes).response;
}

/** Parses every response of a connection that served several requests in turn (keep-alive). */
export function parseResponses(bytes: Buffer): RawResponse[] {
  const responses: RawResponse[] = [];
  while (bytes.length > 0) {
    const next = parseNext(bytes);
    responses.push(next.response);
    bytes = next.rest;
  }
  return responses;
}

function parseNext(bytes: Buffer): { response: RawResponse; rest: Buffer } {
  while (/^HTTP\/1\.[01] 1(?!01)\d\d /.test(bytes.subarray(0, 13).toString("latin1"))) bytes = bytes.subarray(bytes.indexOf("\r\n\r\n") + 4);
  const end = bytes.indexOf("\r\n\r\n");
  if (end === -1) throw new Error(`no complete response head in ${JSON.stringify(bytes.subarray(0, 200).toString("latin1"))}`);
  const [statusLine, ...lines] = bytes.subarray(0, end).toString("latin1").split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? "")?.[1]);
  const headers = lines.map((line): [string, string] => {
    const colon = line.indexOf(":");
    return [line.slice(0, colon), line.slice(colon + 1).trim()];
  });
  const response = { status, headers, body: "" };
  let rest = bytes.subarray(end + 4);
  if (headerValues(response, "transfer-encoding").some((value) => /chunked/i.test(value))) {
    const parts: Buffer[] = [];
    for (;;) {
      const lineEnd = rest.indexOf("\r\n");
      const size = parseInt(rest.subarray(0, lineEnd).toString("latin1"), 16);
      if (!(size > 0)) break;
      parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      rest = rest.subarray(lineEnd + 2 + size + 2);
    }
    response.body = Buffer.concat(parts).toString("utf8");
    // The last chunk, then any trailer fields, end with an empty line.
    const last = rest.indexOf("\r\n\r\n");
    rest = last === -1 ? Buffer.alloc(0) : rest.subarray(last + 4);
  } else {
    const length = headerValues(response, "content-length")[0];
    const size = length === undefined ? rest.length : Number(length);
    response.body = rest.subarray(0, size).toString("utf8");
    rest = rest.subarray(size);
  }
  return { response, rest };
}
