import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import { PassThrough, pipeline, type Readable, Transform, type TransformCallback, type Writable } from "node:stream";
import type { FastifyBaseLogger } from "fastify";
import type { KeygateError } from "../errors/keygate-error.js";
import { clientGone } from "../http/error-handler.js";
import type { UpstreamObserver } from "../http/metrics.js";
import { BodyCapture, captureRequestBody } from "./body-capture.js";
import { addCorsHeaders } from "./cors.js";
import type { Allowed } from "./decision.js";
import { bodyTooLarge, upstreamHeaders, upstreamPath } from "./forwarding.js";
import type { GatewayRequest } from "./gateway-request.js";
import { addEndToEndHeaders } from "./hop-by-hop.js";
import { hasBody } from "./request-body.js";
import type { CompiledRoute } from "./route-table.js";
import { UpstreamAbort, UpstreamClient, upstreamErrorKind } from "./upstream-client.js";
import { refundDue, upstreamFailure } from "./upstream-failure.js";

export interface PlainForwardingOptions {
  log: FastifyBaseLogger;
  /** Told how each route's upstream answered (metrics). */
  upstreams: UpstreamObserver;
  /** Gives back the credits of an allowed request (never rejects). */
  refund: (request: GatewayRequest, decision: Allowed) => Promise<void>;
  /** Answers `error` in the envelope, unless an answer is already under way. */
  answerError: (request: GatewayRequest, response: ServerResponse, error: KeygateError) => void;
}

/**
 * Streams an allowed plain request to its route's upstream and the answer back, through one pool of keep-alive
 * connections per upstream origin. Credits come back when the upstream fails, and when the client left before the
 * upstream had its whole request.
 */
export class PlainForwarding {
  private readonly options: PlainForwardingOptions;
  private readonly upstream = new UpstreamClient();

  constructor(options: PlainForwardingOptions) {
    this.options = options;
  }

  forward(request: GatewayRequest, response: ServerResponse, route: CompiledRoute, decision: Allowed): void {
    const { raw } = request;
    // Gone while its key was verified: nothing is sent upstream, so its credits come back.
    if (clientGone(raw)) return void this.clientLeft(request, response, decision, false);
    const startedAt = performance.now();
    request.upstreamSentAt = startedAt;
    const signal = new UpstreamAbort();
    request.upstreamCall = signal;
    const headers = upstreamHeaders(route, raw.headers, decision.verification, {
      peer: request.remoteAddress,
      protocol: "encrypted" in raw.socket ? "https" : "http",
      host: raw.headers.host,
    });
    // Read whole already when an openapi policy validated it; streamed otherwise.
    const body = request.body ?? (hasBody(raw) ? upstreamBody(raw, route.bodyLimit, request) : null);
    // Bodies are captured only when the route's logging policies ask; otherwise nothing is added to either stream.
    const capture = request.capture;
    if (capture !== undefined) {
      if (capture.requestBody && body !== null) {
        request.requestBody = Buffer.isBuffer(body) ? BodyCapture.of(body) : captureRequestBody(body);
      }
      if (capture.responseBody) {
        request.responseBody = new BodyCapture();
        signal.answerBody = request.responseBody;
      }
    }
    const call = {
      origin: route.upstream.origin,
      path: upstreamPath(route, request),
      method: request.method,
      headers,
      body,
      timeoutMs: route.definition.timeoutMs ?? request.snapshot.settings.upstreamTimeoutMs,
      signal,
    };
    this.upstream
      .call(call, (statusCode, upstreamHeaders) => {
        this.options.upstreams.upstreamAnswered(route.name, (performance.now() - startedAt) / 1000);
        // Our id, the rate limit headers, then the upstream's (which win a name they share): assigned in that order,
        // not spread (docs/architecture.md#conventions).
        const head: OutgoingHttpHeaders = { "x-request-id": request.id };
        const limits = decision.ratelimitHeaders;
        for (const name in limits) head[name] = limits[name];
        addEndToEndHeaders(head, upstreamHeaders, "response");
        if (request.cors !== undefined) addCorsHeaders(head, request.cors);
        // The rest of a request body the upstream did not wait for is not read: the connection cannot be reused.
        if (bodyStillArriving(raw)) head.connection = "close";
        request.head = head;
        if (statusCode >= 500 && refundDue(request, decision)) return this.answerAfterRefund(request, response, decision, statusCode, head);
        request.status = statusCode;
        response.writeHead(statusCode, head);
        return response;
      })
      .catch((error: unknown) => this.upstreamFailed(request, response, route, decision, error));
  }

  /** Closes the pooled upstream connections; call once no request is in flight. */
  async close(): Promise<void> {
    await this.upstream.close();
  }

  /** A 5xx of the upstream reaches the client once its credits are back; its body waits in a buffer meanwhile. */
  private answerAfterRefund(
    request: GatewayRequest,
    response: ServerResponse,
    decision: Allowed,
    statusCode: number,
    head: OutgoingHttpHeaders,
  ): Writable {
    const body = new PassThrough();
    body.once("finish", () => {
      request.upstreamEndedAt = performance.now();
    });
    void this.options.refund(request, decision).then(() => {
      if (response.destroyed) return void body.destroy();
      request.status = statusCode;
      response.writeHead(statusCode, head);
      pipeline(body, response, () => {});
    });
    return body;
  }

  private upstreamFailed(request: GatewayRequest, response: ServerResponse, route: CompiledRoute, decision: Allowed, error: unknown): void {
    request.upstreamEndedAt = performance.now();
    // The answer was under way: all the client can be told is that the connection ends.
    if (response.headersSent) return void response.destroy();
    // Cut off at the route's bodyLimit: refunded as an upstream failure, since the upstream got part of it.
    if (request.bodyTooLarge === true) {
      const limit = route.bodyLimit as number;
      return void this.options.refund(request, decision).then(() => this.options.answerError(request, response, bodyTooLarge(limit)));
    }
    // A client that went away broke the upstream request (mid-upload, or by leaving before the answer began, which
    // aborts the call): not the upstream's failure.
    if (clientGone(request.raw)) return void this.clientLeft(request, response, decision, request.upstreamCall?.sent === true);
    const { log, upstreams } = this.options;
    const kind = upstreamErrorKind(error);
    log.warn({ err: error, requestId: request.id, route: route.name, upstream: route.upstream.origin, kind }, "upstream failed");
    upstreams.upstreamFailed(route.name, kind);
    void this.options
      .refund(request, decision)
      .then(() => this.options.answerError(request, response, upstreamFailure(route, kind === "timeout")));
  }

  /**
   * The client closed its connection before its answer began. Credits come back unless the whole request was
   * `delivered` to the upstream (written by undici): one it had may have been acted on.
   */
  private clientLeft(request: GatewayRequest, response: ServerResponse, decision: Allowed, delivered: boolean): void {
    this.options.log.info(
      { requestId: request.id, code: "err:user:bad_request:client_closed_request" },
      "the client closed the connection before its request was read or answered",
    );
    if (delivered) return void response.destroy();
    void this.options.refund(request, decision).then(() => response.destroy());
  }
}

/**
 * The body the upstream is sent: the client's, through a stream of its own. undici destroys the body of a call that
 * fails (an upstream that resets the connection once it has read the body, say), and destroying the client's
 * request would close the client's connection before it could be answered; a client that leaves mid-upload still
 * fails the call.
 */
function upstreamBody(raw: IncomingMessage, limit: number | undefined, request: GatewayRequest): Readable {
  const body = limit === undefined ? new PassThrough() : new BodyLimit(limit, request);
  raw.pipe(body);
  raw.once("close", () => {
    if (!raw.complete) body.destroy(new Error("the client closed the connection before its whole body arrived"));
  });
  return body;
}

/**
 * A request body on its way upstream, failed as soon as more than `limit` bytes came (the chunk that went past is not
 * passed on): the upstream call fails with it, before the upstream gets the rest.
 */
class BodyLimit extends Transform {
  private readonly limit: number;
  private readonly request: GatewayRequest;
  private passed = 0;

  constructor(limit: number, request: GatewayRequest) {
    super();
    this.limit = limit;
    this.request = request;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.passed += chunk.length;
    if (this.passed <= this.limit) return void callback(null, chunk);
    this.request.bodyTooLarge = true;
    callback(new Error(`the request body passed the route's limit of ${this.limit} bytes`));
  }
}

/** Whether part of a request's body has yet to arrive (`complete` alone is false for a bodyless request at first). */
export function bodyStillArriving(request: IncomingMessage): boolean {
  return !request.complete && hasBody(request);
}
