import { connect } from "node:net";

/** One HTTP/1.1 response as it came off the wire. */
export interface RawAnswer {
  status: number;
  /** Lower-case names; a repeated header keeps every value, joined with ", ". */
  headers: Record<string, string>;
  body: Buffer;
}

export interface RawExchange {
  answers: RawAnswer[];
  /** The server closed the connection (or reset it) before we did. */
  closedByServer: boolean;
  /** Bytes after the last complete response that do not form one (a response cut short, or garbage). */
  rest: Buffer;
}

export interface RawOptions {
  /** Stop once this many final (non-1xx) responses are complete; the connection is then closed by us. */
  answers: number;
  /** Methods of the requests in order, so that a HEAD answer is read without a body. */
  methods?: readonly string[];
  /** Half-close after writing: the server sees the end of the request stream (a truncated body stays truncated). */
  endAfterWrite?: boolean;
  /** Upper bound on waiting for the answers or the close, in ms (a bound, not an expectation). */
  waitMs?: number;
}

/**
 * Writes raw bytes to a server and reads what comes back, parsing HTTP/1.1 responses (Content-Length, chunked,
 * or until close). For input a real client library would refuse to send: bad framing, odd headers, pipelining.
 */
export function rawExchange(port: number, request: Buffer | string, options: RawOptions): Promise<RawExchange> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: "127.0.0.1" });
    let received = Buffer.alloc(0);
    let settled = false;
    const finish = (closedByServer: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const { answers, rest } = parseResponses(received, options.methods ?? [], closedByServer);
      resolve({ answers, closedByServer, rest });
    };
    const timer = setTimeout(() => finish(false), options.waitMs ?? 5_000);
    socket.on("connect", () => {
      socket.write(request);
      if (options.endAfterWrite) socket.end();
    });
    socket.on("data", (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (parseResponses(received, options.methods ?? [], false).answers.length >= options.answers) finish(false);
    });
    socket.on("error", () => finish(true));
    socket.on("close", () => finish(true));
  });
}

/** Complete responses at the start of `data`; with `atEnd`, a response without length ends at the end of data. */
export function parseResponses(data: Buffer, methods: readonly string[], atEnd: boolean): { answers: RawAnswer[]; rest: Buffer } {
  const answers: RawAnswer[] = [];
  let offset = 0;
  for (;;) {
    const headEnd = data.indexOf("\r\n\r\n", offset);
    if (headEnd === -1) break;
    const lines = data.subarray(offset, headEnd).toString("latin1").split("\r\n");
    const statusMatch = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "");
    if (!statusMatch) break;
    const status = Number(statusMatch[1]);
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      if (colon === -1) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    let bodyStart = headEnd + 4;
    // Interim answers (100 Continue) are skipped; 101 Switching Protocols is the last HTTP answer on its connection.
    if (status >= 100 && status < 200 && status !== 101) {
      offset = bodyStart;
      continue;
    }
    const method = methods[answers.length] ?? "GET";
    let body: Buffer;
    if (method === "HEAD" || status === 101 || status === 204 || status === 304) {
      body = Buffer.alloc(0);
    } else if (/chunked/i.test(headers["transfer-encoding"] ?? "")) {
      const chunks: Buffer[] = [];
      let position = bodyStart;
      let complete = false;
      for (;;) {
        const lineEnd = data.indexOf("\r\n", position);
        if (lineEnd === -1) break;
        const size = parseInt(data.subarray(position, lineEnd).toString("latin1"), 16);
        if (Number.isNaN(size)) break;
        if (size === 0) {
          const trailerEnd = data.indexOf("\r\n\r\n", lineEnd);
          if (trailerEnd === -1 && data.length < lineEnd + 4) break;
          position = trailerEnd === -1 ? lineEnd + 4 : trailerEnd + 4;
          complete = true;
          break;
        }
        if (data.length < lineEnd + 2 + size + 2) break;
        chunks.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
        position = lineEnd + 2 + size + 2;
      }
      if (!complete) break;
      answers.push({ status, headers, body: Buffer.concat(chunks) });
      offset = position;
      continue;
    } else if (headers["content-length"] !== undefined) {
      const length = Number(headers["content-length"]);
      if (data.length < bodyStart + length) break;
      body = data.subarray(bodyStart, bodyStart + length);
      bodyStart += length;
    } else {
      if (!atEnd) break;
      body = data.subarray(bodyStart);
      bodyStart = data.length;
    }
    answers.push({ status, headers, body });
    offset = bodyStart;
  }
  return { answers, rest: data.subarray(offset) };
}
