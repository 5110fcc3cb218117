import type { IncomingMessage, OutgoingHttpHeaders } from "node:http";
import { constants, type Http2ServerRequest } from "node:http2";

// Requests over HTTP/2 (server.tls) reach keygate as Node's compatibility objects, which the rest of keygate serves
// as it serves HTTP/1.1 requests. Where the two protocols differ, the difference is handled here.

/** Whether a request came over HTTP/2. */
export function isHttp2(request: IncomingMessage): boolean {
  return request.httpVersionMajor === 2;
}

/** Whether a header is one of HTTP/2's pseudo-headers (":method", ":path", ":authority", ":scheme"). */
export function isPseudoHeader(name: string): boolean {
  return name.charCodeAt(0) === 0x3a;
}

/** The host the client addressed: Host, or on HTTP/2 the :authority pseudo-header (which replaces it). */
export function requestAuthority(request: IncomingMessage): string | undefined {
  return request.headers.host ?? (request.headers as { ":authority"?: string })[":authority"];
}

/**
 * Whether an HTTP/2 request has a body: a stream its client did not end with its headers. HTTP/2 needs neither a
 * Content-Length nor a transfer coding for one (RFC 9113 §8.1).
 */
export function http2HasBody(request: IncomingMessage): boolean {
  return !(request as unknown as Http2ServerRequest).stream.endAfterHeaders;
}

/**
 * The answer to a request whose body is still arriving ends what the rest of the body would come on, so that keygate
 * does not read and discard it at the client's pace. On HTTP/1.1, the connection: returns true, and the caller adds
 * `Connection: close` to the answer. On HTTP/2, the request's stream alone, once the answer is sent (RST_STREAM
 * NO_ERROR, RFC 9113 §8.1), the connection's other streams going on: returns false. What had arrived unread is
 * dropped, so the stream closes (and the response reports its close) instead of waiting for a reader.
 */
export function closeAfterAnswer(request: IncomingMessage): boolean {
  if (!isHttp2(request)) return true;
  // `complete` is false until a reader takes the end of the stream, even when the client sent no body.
  if (!http2HasBody(request)) return false;
  const stream = (request as unknown as Http2ServerRequest).stream;
  // The stream's own 'finish': the answer is handed over whole (the response's 'finish' waits for the stream's close).
  stream.once("finish", () => {
    if (stream.closed || stream.state.remoteClose) return;
    stream.close(constants.NGHTTP2_NO_ERROR);
    request.resume();
  });
  return false;
}

/**
 * Fields an HTTP/2 answer must not have once (Node throws on a second value): the single-value fields of Node's
 * HTTP/2 implementation (lib/internal/http2/util.js).
 */
const SINGLE_VALUE: ReadonlySet<string> = new Set([
  ":status",
  "access-control-allow-credentials",
  "access-control-max-age",
  "access-control-request-method",
  "age",
  "authorization",
  "content-encoding",
  "content-language",
  "content-length",
  "content-location",
  "content-md5",
  "content-range",
  "content-type",
  "date",
  "dnt",
  "etag",
  "expires",
  "from",
  "host",
  "if-match",
  "if-modified-since",
  "if-none-match",
  "if-range",
  "if-unmodified-since",
  "last-modified",
  "location",
  "max-forwards",
  "proxy-authorization",
  "range",
  "referer",
  "retry-after",
  "tk",
  "upgrade-insecure-requests",
  "user-agent",
  "x-content-type-options",
]);

/**
 * Makes an answer's head one HTTP/2 can carry (in place): no `Connection` (keygate's own `Connection: close`;
 * every other connection-specific field is hop-by-hop and never passed on), and a field HTTP/2 allows once keeps the
 * first of several values an upstream sent. Node would refuse the answer otherwise.
 */
export function fitForHttp2(head: OutgoingHttpHeaders): OutgoingHttpHeaders {
  delete head.connection;
  for (const name in head) {
    const value = head[name];
    if (Array.isArray(value) && SINGLE_VALUE.has(name)) head[name] = value[0];
  }
  return head;
}
