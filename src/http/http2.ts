import type { IncomingMessage, OutgoingHttpHeaders } from "node:http";
import { connect, constants, type Http2ServerRequest } from "node:http2";
import { Duplex } from "node:stream";

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

/** What Node answered for each field name asked so far: whether its HTTP/2 allows the field once only. */
const allowedOnceByName = new Map<string, boolean>();
/** Names remembered at most: an upstream could send endless names; one past these is asked again when it comes. */
const MAX_REMEMBERED_NAMES = 1_000;

/**
 * Whether Node's HTTP/2 allows a field once only (it throws on a second value: ERR_HTTP2_HEADER_SINGLE_VALUE).
 * Node keeps that list to itself, so it is asked, once per name: a client session over a stream that goes nowhere
 * (`createConnection`) checks the headers of a request as it is made, before anything is sent.
 */
export function allowedOnce(name: string): boolean {
  let once = allowedOnceByName.get(name);
  if (once === undefined) {
    once = askNode(name);
    if (allowedOnceByName.size < MAX_REMEMBERED_NAMES) allowedOnceByName.set(name, once);
  }
  return once;
}

function askNode(name: string): boolean {
  const nowhere = new Duplex({ read() {}, write: (_chunk, _encoding, callback) => callback() });
  const session = connect("http://keygate.invalid", { createConnection: () => nowhere });
  session.on("error", () => {});
  try {
    session.request({ [name]: ["a", "b"] }).on("error", () => {});
    return false;
  } catch (error) {
    return (error as { code?: string }).code === "ERR_HTTP2_HEADER_SINGLE_VALUE";
  } finally {
    session.destroy();
  }
}

/**
 * Makes an answer's head one HTTP/2 can carry (in place): no `Connection` (keygate's own `Connection: close`;
 * every other connection-specific field is hop-by-hop and never passed on), and a field HTTP/2 allows once keeps the
 * first of several values an upstream sent. Node would refuse the answer otherwise.
 */
export function fitForHttp2(head: OutgoingHttpHeaders): OutgoingHttpHeaders {
  delete head.connection;
  for (const name in head) {
    const value = head[name];
    if (Array.isArray(value) && allowedOnce(name)) head[name] = value[0];
  }
  return head;
}
