import { EventEmitter } from "node:events";
import type { IncomingHttpHeaders } from "node:http";
import type { Readable, Writable } from "node:stream";
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
 * Aborts an upstream call. Every forwarded request makes one, and undici takes an EventEmitter as a call's signal
 * as readily as an AbortSignal: an emitter costs a small fraction of an AbortController.
 */
export class UpstreamAbort extends EventEmitter {
  /** Whether undici has written the whole request: from then on the upstream may act on it, even if aborted. */
  sent = false;
  /**
   * Whether undici had a connection for the call and was about to write it: before then nothing of the request, its
   * body included, left keygate, so it may be sent to another target.
   */
  connected = false;
  /** Where the answer's body is captured as undici hands it on; set only for a request whose event records it. */
  declare answerBody?: BodyCapture;

  abort(): void {
    this.emit("abort");
  }
}

/**
 * Passes every callback of undici's handler for a call through, and marks the call's UpstreamAbort when the whole
 * request has been written.
 */
class SentMarker implements Dispatcher.DispatchHandler {
  private readonly handler: Dispatcher.DispatchHandler;
  private readonly call: UpstreamAbort;

  constructor(handler: Dispatcher.DispatchHandler, call: UpstreamAbort) {
    this.handler = handler;
    this.call = call;
  }

  onRequestSent(): void {
    this.call.sent = true;
  }

  onConnect(abort: (error?: Error) => void): void {
    this.call.connected = true;
    this.handler.onConnect?.(abort);
  }

  onHeaders(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean {
    return this.handler.onHeaders?.(statusCode, headers, resume, statusText) ?? true;
  }

  onData(chunk: Buffer): boolean {
    return this.handler.onData?.(chunk) ?? true;
  }

  onComplete(trailers: string[] | null): void {
    this.handler.onComplete?.(trailers);
  }

  onError(error: Error): void {
    this.handler.onError?.(error);
  }
}

/** A SentMarker that also shows each chunk of the answer's body to its capture, once handed on. */
class CapturingMarker extends SentMarker {
  private readonly capture: BodyCapture;

  constructor(handler: Dispatcher.DispatchHandler, call: UpstreamAbort, capture: BodyCapture) {
    super(handler, call);
    this.capture = capture;
  }

  override onData(chunk: Buffer): boolean {
    const more = super.onData(chunk);
    this.capture.add(chunk);
    return more;
  }
}

/** undici's Agent, its calls' handlers wrapped in a SentMarker (a CapturingMarker when the answer's body is captured). */
class MarkingAgent extends Agent {
  override dispatch(options: Agent.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const { signal } = options as { signal?: unknown };
    if (!(signal instanceof UpstreamAbort)) return super.dispatch(options, handler);
    const capture = signal.answerBody;
    return super.dispatch(options, capture ? new CapturingMarker(handler, signal, capture) : new SentMarker(handler, signal));
  }
}

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
 * certificate and key), given to every connection it opens. Its calls' handlers are marked (SentMarker).
 */
export function upstreamAgent(connect?: Agent.Options["connect"]): Dispatcher {
  const options: Agent.Options = { connections: 128, pipelining: 1, keepAliveTimeout: 60_000 };
  if (connect !== undefined) options.connect = connect;
  return new MarkingAgent(options);
}

/** How a call failed, from undici's and the socket's error codes. */
export function upstreamErrorKind(error: unknown): UpstreamErrorKind {
  const code = (error as { code?: string }).code ?? (error as { cause?: { code?: string } }).cause?.code;
  if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT") return "timeout";
  return code === "ECONNRESET" || code === "UND_ERR_SOCKET" || code === "EPIPE" ? "reset" : "unreachable";
}
