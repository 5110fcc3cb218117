import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import { PassThrough, pipeline, type Readable, type Writable } from "node:stream";
import type { FastifyBaseLogger } from "fastify";
import type { KeygateError } from "../errors/keygate-error.js";
import { clientGone } from "../http/error-handler.js";
import { closeAfterAnswer, fitForHttp2, isHttp2, requestAuthority } from "../http/http2.js";
import type { UpstreamObserver } from "../http/metrics.js";
import { BodyCapture, captureRequestBody } from "./body-capture.js";
import { addCorsHeaders } from "./cors.js";
import type { Allowed } from "./decision.js";
import { bodyTooLarge, upstreamHeaders, upstreamPath } from "./forwarding.js";
import type { GatewayRequest } from "./gateway-request.js";
import type { GatewaySnapshot } from "./gateway-snapshot.js";
import { addEndToEndHeaders } from "./hop-by-hop.js";
import { addVia, viaEntry } from "./loop-detection.js";
import { hasBody } from "./request-body.js";
import type { CompiledRoute } from "./route-table.js";
import { UpstreamAbort, type UpstreamCall, upstreamErrorKind } from "./upstream-client.js";
import { noHealthyUpstream, refundDue, upstreamFailure } from "./upstream-failure.js";
import type { PoolTarget } from "./upstream-pool.js";
import type { PoolEntry, UpstreamPools } from "./upstream-pools.js";
import { type Attempts, ClientBody, retryAfterFailure, retryOnStatus } from "./upstream-retry.js";

export interface PlainForwardingOptions {
  log: FastifyBaseLogger;
  /** Told how each route's upstream answered (metrics). */
  upstreams: UpstreamObserver;
  /** Gives back the credits of an allowed request (never rejects). */
  refund: (request: GatewayRequest, decision: Allowed) => Promise<void>;
  /** Answers `error` in the envelope, unless an answer is already under way. */
  answerError: (request: GatewayRequest, response: ServerResponse, error: KeygateError) => void;
  /** A failure nothing else caught (a bug): logged with the request's id, the client answered 500 if it still can be. */
  unexpected: (request: GatewayRequest, response: ServerResponse, error: unknown) => void;
  /** Each route's pool of targets, and the HTTP client to them. */
  pools: UpstreamPools;
  /** keygate's name in Via with these settings. */
  pseudonym: (snapshot: GatewaySnapshot) => string;
}

/** One allowed request on its way to its upstream: what each attempt (one per target tried) sends. */
interface Forwarding extends Attempts {
  readonly request: GatewayRequest;
  readonly response: ServerResponse;
  readonly route: CompiledRoute;
  readonly decision: Allowed;
  readonly entry: PoolEntry;
  readonly headers: IncomingHttpHeaders;
  readonly path: string;
  readonly timeoutMs: number;
  readonly startedAt: number;
}

/**
 * Streams an allowed plain request to a target of its route's upstream and the answer back, through one pool of
 * keep-alive connections per upstream origin; a call that fails safely to retry is tried again on another target
 * (upstream-retry.ts). Credits come back when the upstream fails, when no target is healthy, and when the client
 * left before the upstream had its whole request: once per request, whatever the attempts.
 */
export class PlainForwarding {
  private readonly options: PlainForwardingOptions;

  constructor(options: PlainForwardingOptions) {
    this.options = options;
  }

  forward(request: GatewayRequest, response: ServerResponse, route: CompiledRoute, decision: Allowed): void {
    const { raw } = request;
    // Gone while its key was verified: nothing is sent upstream, so its credits come back.
    if (clientGone(raw)) return void this.clientLeft(request, response, decision, false);
    const entry = this.options.pools.of(route);
    const target = entry.pool.pick();
    if (target === undefined) return void this.noHealthyTarget(request, response, route, decision);
    const startedAt = performance.now();
    request.upstreamSentAt = startedAt;
    const headers = upstreamHeaders(route, raw.headers, decision.verification, {
      peer: request.remoteAddress,
      protocol: "encrypted" in raw.socket ? "https" : "http",
      host: requestAuthority(raw),
      via: viaEntry(raw, this.options.pseudonym(request.snapshot)),
    });
    // Read whole already when an openapi policy validated it; streamed otherwise.
    const body = request.body ?? (hasBody(raw) ? new ClientBody(raw, route.bodyLimit, request) : null);
    // Bodies are captured only when the route's logging policies ask; otherwise nothing is added to either stream.
    if (request.capture?.requestBody && body !== null) {
      request.requestBody = Buffer.isBuffer(body) ? BodyCapture.of(body) : captureRequestBody(body);
    }
    const forwarding: Forwarding = {
      request,
      response,
      route,
      decision,
      entry,
      method: request.method,
      body,
      tried: [target],
      pool: entry.pool,
      headers,
      path: upstreamPath(route, request),
      timeoutMs: route.definition.timeoutMs ?? request.snapshot.settings.upstreamTimeoutMs,
      startedAt,
    };
    this.attempt(forwarding, target);
  }

  /** Sends the request to `target`; a failure or a status that may be retried goes on to another target. */
  private attempt(forwarding: Forwarding, target: PoolTarget): void {
    const { request, response, route, decision, pool } = forwarding;
    const signal = new UpstreamAbort();
    request.upstreamCall = signal;
    if (request.capture?.responseBody) {
      request.responseBody = new BodyCapture();
      signal.answerBody = request.responseBody;
    }
    // The target is addressed by its own name (virtual hosts, TLS names), unless the route passes the client's on.
    if (!route.clientHost || requestAuthority(request.raw) === undefined) forwarding.headers.host = target.url.host;
    let status = 0;
    let retry: PoolTarget | undefined;
    const call: UpstreamCall = {
      origin: target.origin,
      path: forwarding.path,
      method: request.method,
      headers: forwarding.headers,
      body: forwarding.body,
      timeoutMs: forwarding.timeoutMs,
      signal,
    };
    if (forwarding.entry.dispatcher !== undefined) call.dispatcher = forwarding.entry.dispatcher;
    this.options.pools.client
      .call(call, (statusCode, upstreamHeaders) => {
        status = statusCode;
        // Nothing of this answer has gone to the client: it is read and dropped, and another target asked.
        retry = retryOnStatus(forwarding, statusCode);
        if (retry !== undefined) return new PassThrough().resume();
        this.options.upstreams.upstreamAnswered(route.name, (performance.now() - forwarding.startedAt) / 1000);
        // Our id, the rate limit headers, then the upstream's (which win a name they share): assigned in that order,
        // not spread (docs/architecture.md#conventions).
        const head: OutgoingHttpHeaders = { "x-request-id": request.id };
        const limits = decision.ratelimitHeaders;
        for (const name in limits) head[name] = limits[name];
        addEndToEndHeaders(head, upstreamHeaders, "response");
        addVia(head, viaEntry(undefined, this.options.pseudonym(request.snapshot)));
        if (request.cors !== undefined) addCorsHeaders(head, request.cors);
        // The rest of a request body the upstream did not wait for is not read: the connection cannot be reused.
        const raw = request.raw;
        if (bodyStillArriving(raw) && closeAfterAnswer(raw)) head.connection = "close";
        if (isHttp2(raw)) fitForHttp2(head);
        request.head = head;
        if (statusCode >= 500 && refundDue(request, decision)) return this.answerAfterRefund(request, response, decision, statusCode, head);
        request.status = statusCode;
        response.writeHead(statusCode, head);
        return response;
      })
      .then(
        () => {
          this.settled(forwarding, target, status > 0 && pool.answered(target, status));
          if (retry !== undefined) this.retried(forwarding, target, retry, `status ${status}`, true);
        },
        (error: unknown) => {
          // A dropped answer cut short: the status was the failure.
          if (retry !== undefined) {
            this.settled(forwarding, target, pool.answered(target, status));
            return this.retried(forwarding, target, retry, `status ${status}`, true);
          }
          this.upstreamFailed(forwarding, target, signal, error, status > 0);
        },
      )
      .catch((error: unknown) => this.options.unexpected(request, response, error));
  }

  /**
   * Sends the request on to `to` after `from` failed it or answered a status to retry; `delivered`: `from` had the
   * whole request (it answered, or undici had it all), so a client gone meanwhile gets no credits back.
   */
  private retried(forwarding: Forwarding, from: PoolTarget, to: PoolTarget, why: string, delivered: boolean): void {
    const { request, route } = forwarding;
    if (clientGone(request.raw)) {
      forwarding.pool.released(to);
      return void this.clientLeft(request, forwarding.response, forwarding.decision, delivered);
    }
    this.options.log.info({ requestId: request.id, route: route.name, from: from.shown, to: to.shown, why }, "upstream call retried");
    this.attempt(forwarding, to);
  }

  /** Logs a target ejected by what its call came to. */
  private settled(forwarding: Forwarding, target: PoolTarget, ejected: boolean): void {
    if (!ejected) return;
    const cooldownMs = forwarding.pool.upstream.passive?.cooldownMs;
    this.options.log.warn({ route: forwarding.route.name, upstream: target.shown, cooldownMs }, "upstream target ejected");
  }

  /** No target of the route's pool is healthy: 503 once the credits are back, without a call. */
  private noHealthyTarget(request: GatewayRequest, response: ServerResponse, route: CompiledRoute, decision: Allowed): void {
    this.options.log.warn({ requestId: request.id, route: route.name }, "no healthy upstream target");
    this.options.upstreams.upstreamFailed(route.name, "no_healthy_target");
    this.refunded(request, response, decision, () => this.options.answerError(request, response, noHealthyUpstream(route)));
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
    this.refunded(request, response, decision, () => {
      if (response.destroyed) return void body.destroy();
      request.status = statusCode;
      response.writeHead(statusCode, head);
      pipeline(body, response, () => {});
    });
    return body;
  }

  /** A call that failed; `answerBegan`: its status and headers had come (its body failed), so it is not retried. */
  private upstreamFailed(forwarding: Forwarding, target: PoolTarget, signal: UpstreamAbort, error: unknown, answerBegan: boolean): void {
    const { request, response, route, decision, pool } = forwarding;
    request.upstreamEndedAt = performance.now();
    // Cut off at the route's bodyLimit: refunded as an upstream failure, since the upstream got part of it; the
    // target is not to blame, and nothing is retried.
    if (request.bodyTooLarge === true) {
      pool.released(target);
      if (response.headersSent) return void response.destroy();
      const limit = route.bodyLimit as number;
      return void this.refunded(request, response, decision, () => this.options.answerError(request, response, bodyTooLarge(limit)));
    }
    // A client that went away broke the upstream request (mid-upload, or by leaving before the answer began, which
    // aborts the call): not the upstream's failure.
    if (clientGone(request.raw)) {
      pool.released(target);
      if (response.headersSent) return void response.destroy();
      return void this.clientLeft(request, response, decision, signal.sent);
    }
    this.settled(forwarding, target, pool.failed(target));
    // The answer was under way: all the client can be told is that the connection ends.
    if (response.headersSent) return void response.destroy();
    const { log, upstreams } = this.options;
    const kind = upstreamErrorKind(error);
    log.warn({ err: error, requestId: request.id, route: route.name, upstream: target.shown, kind }, "upstream failed");
    upstreams.upstreamFailed(route.name, kind);
    const next = answerBegan ? undefined : retryAfterFailure(forwarding, signal.connected, kind);
    if (next !== undefined) {
      // Nothing of a streamed body was taken: a fresh stream carries it to the next target.
      if (!Buffer.isBuffer(forwarding.body) && forwarding.body !== null) forwarding.body = this.freshBody(request, route);
      return void this.retried(forwarding, target, next, kind, signal.sent);
    }
    this.refunded(request, response, decision, () =>
      this.options.answerError(request, response, upstreamFailure(route, kind === "timeout", error)),
    );
  }

  /** The client's body through a new stream (the first was destroyed with its call, before anything was read). */
  private freshBody(request: GatewayRequest, route: CompiledRoute): Readable {
    const body = new ClientBody(request.raw, route.bodyLimit, request);
    if (request.capture?.requestBody) request.requestBody = captureRequestBody(body);
    return body;
  }

  /**
   * The client closed its connection before its answer began. Credits come back unless the whole request was
   * `delivered` to the upstream (it had it whole: `UpstreamAbort.sent`): one it had may have been acted on.
   */
  private clientLeft(request: GatewayRequest, response: ServerResponse, decision: Allowed, delivered: boolean): void {
    this.options.log.info(
      { requestId: request.id, code: "err:user:bad_request:client_closed_request" },
      "the client closed the connection before its request was read or answered",
    );
    if (delivered) return void response.destroy();
    this.refunded(request, response, decision, () => response.destroy());
  }

  /** Gives back the request's credits, then does `next`; a failure of `next` (a bug) is logged and answered. */
  private refunded(request: GatewayRequest, response: ServerResponse, decision: Allowed, next: () => void): void {
    this.options
      .refund(request, decision)
      .then(next)
      .catch((error: unknown) => this.options.unexpected(request, response, error));
  }
}

/** Whether part of a request's body has yet to arrive (`complete` alone is false for a bodyless request at first). */
export function bodyStillArriving(request: IncomingMessage): boolean {
  return !request.complete && hasBody(request);
}
