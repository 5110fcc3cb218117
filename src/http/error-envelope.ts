import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { ERROR_CATALOGUE, errorTypeUrl } from "../errors/catalogue.js";
import type { KeygateError } from "../errors/keygate-error.js";
import { defined } from "../lib/defined.js";

// The error envelope, as every answer of keygate's carries it: through Fastify's reply (error-handler.ts), on the
// gateway's responses, and written on a raw socket.

/** An error answer written outside Fastify's reply (the gateway's listener, a raw socket): status, headers, body. */
export function errorAnswer(requestId: string, error: KeygateError, docsUrl: string): ErrorAnswer {
  const status = ERROR_CATALOGUE[error.code].status;
  const body = JSON.stringify(errorBody(requestId, error, docsUrl));
  const headers = {
    ...error.headers,
    "x-request-id": requestId,
    "content-type": errorMediaType(status),
    "content-length": String(Buffer.byteLength(body)),
  };
  return { status, headers, body };
}

export interface ErrorAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Writes `error` as a complete HTTP response on a raw socket (a request Node could not parse, an upgrade, neither
 * of which has a reply object) and closes the connection once it is written. Returns the answer as written;
 * undefined when the socket was already gone.
 */
export function answerOnSocket(socket: Duplex, requestId: string, error: KeygateError, docsUrl: string): ErrorAnswer | undefined {
  if (socket.destroyed) return undefined;
  const answer = errorAnswer(requestId, error, docsUrl);
  const { status, headers, body } = answer;
  headers.connection = "close";
  const lines = [`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}`];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  socket.end(`${lines.join("\r\n")}\r\n\r\n${body}`);
  return answer;
}

/** The media type of an error: problem+json for 429s (the SDK requires it) and where a route asks for it. */
export function errorMediaType(status: number, problemJson = false): string {
  return problemJson || status === 429 ? "application/problem+json; charset=utf-8" : "application/json; charset=utf-8";
}

export function errorBody(requestId: string, error: KeygateError, docsUrl: string): object {
  const entry = ERROR_CATALOGUE[error.code];
  return {
    meta: { requestId },
    error: {
      title: entry.title,
      detail: error.detail,
      status: entry.status,
      type: errorTypeUrl(error.code, docsUrl),
      // Every 400 carries errors[] (the SDK's typed 400 requires it), empty when no field is to blame.
      ...defined({ errors: error.errors ?? (entry.status === 400 ? [] : undefined) }),
    },
  };
}
