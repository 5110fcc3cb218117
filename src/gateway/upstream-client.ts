import { EventEmitter } from "node:events";
import type { IncomingHttpHeaders } from "node:http";
import type { Duplex, Readable, Writable } from "node:stream";
import { Agent, type Dispatcher } from "undici";
import type { UpstreamErrorKind } from "../http/metrics.js";
import type { BodyCapture } from "./body-capture.js";

/** What the upstream answered, before its body: the writable its body streams into is returned for it. */
export type UpstreamHead = (statusCode: number, headers: IncomingHttpHeaders) => Writable;

export interface UpstreamCall {
  /** The upstream's origin, e.g. "http://orders:8080". */
  origin: string;
  /** Path and query string. */
  path: string;
  method: string;
  headers: IncomingHttpHeaders;
  /** The request body, streamed, or read whole already; null when the request has none. */
  body: Readable | Buffer | null;
  /** For the answer's headers, and then between two chunks of its body. */
  timeoutMs: number;
  /** Aborts the call (the client went away before the answer ended). */
  signal: UpstreamAbort;
  /** The pool of connections to use: an upstream's own (its TLS settings); the shared one when absent. */
  dispatcher?: Dispatcher;
}

/**
 * Aborts an upstream call, and tells what undici did with it. Every forwarded request makes one, and undici takes an
 * EventEmitter as a call's signal as readily as an AbortSignal: an emitter costs a small fraction of an
 * AbortController.
 */
export class UpstreamAbort extends EventEmitter {
  /**
   * Whether undici had a connection for the call and was about to write it (undici's documented `onRequestStart`):
   * before then nothing of the request, its body included, left keygate, so it may be sent to another target.
   */
  connected = false;
  /** The body undici was given for the call, as dispatched. */
  private body: unknown = null;
  /** Where the answer's body is captured as undici hands it on; set only for a request whose event records it. */
  declare answerBody?: BodyCapture;

  /**
   * Whether undici has the whole request: from then on the upstream may act on it, even if aborted. A request
   * without a body, or with one held whole, is written at once when undici starts it on a connection; a streamed
   * body is had whole once undici has pulled its last byte (the stream ended: Node's `readableEnded`). Worked out
   * from keygate's own body and undici's documented handler API (test/gateway/upstream-delivery.test.ts).
   */
  get sent(): boolean {
    if (!this.connected) return false;
    return !isStream(this.body) || this.body.readableEnded;
  }

  abort(): void {
    this.emit("abort");
  }

  /** Called by the dispatcher's interceptor (markCalls) with the body undici is given. */
  dispatched(body: unknown): void {
    this.body = body;
  }
}

function isStream(body: unknown): body is Readable {
  return typeof body === "object" && body !== null && typeof (body as Readable).pipe === "function";
}

/**
 * A call's handler in undici's documented handler API (onRequestStart, onResponseStart, ...): passes every callback
 * through, marks the call's UpstreamAbort connected when undici starts it on a connection, and shows each chunk of
 * the answer's body to its capture (when the request's event records it) once handed on.
 */
class CallMarker implements Dispatcher.DispatchHandler {
  private readonly handler: Dispatcher.DispatchHandler;
  private readonly call: UpstreamAbort;
  private readonly capture: BodyCapture | undefined;

  constructor(handler: Dispatcher.DispatchHandler, call: UpstreamAbort) {
    this.handler = handler;
    this.call = call;
    this.capture = call.answerBody;
  }

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    this.handler.onRequestStart?.(controller, context);
    // A call aborted as it starts (its client gone meanwhile) is not written.
    this.call.connected = !controller.aborted;
  }

  onRequestUpgrade(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders, socket: Duplex): void {
    this.handler.onRequestUpgrade?.(controller, statusCode, headers, socket);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    statusMessage?: string,
  ): void {
    this.handler.onResponseStart?.(controller, statusCode, headers, statusMessage);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.handler.onResponseData?.(controller, chunk);
    this.capture?.add(chunk);
  }

  onResponseEnd(controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    this.handler.onResponseEnd?.(controller, trailers);
  }

  onResponseError(controller: Dispatcher.DispatchController, error: Error): void {
    this.handler.onResponseError?.(controller, error);
  }
}

/**
 * The interceptor (undici's documented `compose()`) that marks every forwarded call: a call whose signal is an
 * UpstreamAbort learns its body and gets a CallMarker; others (health probes) pass untouched.
 */
const markCalls: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (options, handler) => {
  const { signal } = options as { signal?: unknown };
  if (!(signal instanceof UpstreamAbort)) return dispatch(options, handler);
  signal.dispatched(options.body);
  return dispatch(options, new CallMarker(handler, signal));
};

/**
 * The HTTP client to every upstream: one undici Agent, a pool of keep-alive connections per origin. A call
 * streams the request body up and the answer's body into the writable its head asks for, with backpressure both
 * ways; a writable closed early, or the call's signal (the client went away before the answer began), aborts the
 * upstream request and frees its connection.
 */
export class UpstreamClient {
  private readonly agent = upstreamAgent();

  /** The shared pool of connections, for calls and probes of upstreams without TLS settings of their own. */
  get dispatcher(): Dispatcher {
    return this.agent;
  }

  /** Resolves once the answer is whole; rejects when the upstream fails before or while answering. */
  async call(call: UpstreamCall, head: UpstreamHead): Promise<void> {
    await (call.dispatcher ?? this.agent).stream(
      {
        origin: call.origin,
        path: call.path,
        method: call.method as Dispatcher.HttpMethod,
        headers: call.headers as Record<string, string | string[]>,
        body: call.body,
        headersTimeout: call.timeoutMs,
        bodyTimeout: call.timeoutMs,
        signal: call.signal,
      },
      ({ statusCode, headers }) => head(statusCode, headers as IncomingHttpHeaders),
    );
  }

  /** Closes every pooled connection once the calls in flight are done. */
  async close(): Promise<void> {
    await this.agent.close();
  }
}

/**
 * A pool of keep-alive connections per origin; `connect` holds an upstream's own TLS settings (its CA, its client
 * certificate and key), given to every connection it opens. Its calls are marked (markCalls).
 */
export function upstreamAgent(connect?: Agent.Options["connect"]): Dispatcher {
  const options: Agent.Options = { connections: 128, pipelining: 1, keepAliveTimeout: 60_000 };
  if (connect !== undefined) options.connect = connect;
  return new Agent(options).compose(markCalls);
}

/** How a call failed, from undici's and the socket's error codes. */
export function upstreamErrorKind(error: unknown): UpstreamErrorKind {
  const code = (error as { code?: string }).code ?? (error as { cause?: { code?: string } }).cause?.code;
  if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT") return "timeout";
  return code === "ECONNRESET" || code === "UND_ERR_SOCKET" || code === "EPIPE" ? "reset" : "unreachable";
}
