import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import { PassThrough, pipeline, type Writable } from "node:stream";
import type { FastifyBaseLogger } from "fastify";
import type { EventSink, GatewayRequestEvent } from "../domain/analytics/events.js";
import type { KeyService } from "../domain/keys/key-service.js";
import { isKeygateError, type KeygateError } from "../errors/keygate-error.js";
import { whenAnswerCloses } from "../http/answer-closed.js";
import { clientGone, errorAnswer, logServerError, shuttingDownError, unexpectedError } from "../http/error-handler.js";
import type { UpstreamObserver } from "../http/metrics.js";
import { unservableRequest } from "../http/protocol-checks.js";
import type { RequestTelemetry } from "../http/request-telemetry.js";
import type { Clock } from "../lib/clock.js";
import { newId } from "../lib/ids.js";
import { type Allowed, type DecisionServices, GatewayDecider, type GatewayRequest, type Matched } from "./decision.js";
import { decodedPath, upstreamHeaders, upstreamPath } from "./forwarding.js";
import { endToEndHeaders } from "./hop-by-hop.js";
import { GatewayRequestEvents, noteDecision, type ServedRequest } from "./request-events.js";
import type { RouteState } from "./route-state.js";
import type { CompiledRoute } from "./route-table.js";
import { UpstreamAbort, UpstreamClient, upstreamErrorKind } from "./upstream-client.js";
import { refundAfterUpstreamFailure, refundDue, upstreamFailure } from "./upstream-failure.js";

export interface GatewayOptions {
  services: DecisionServices & { readonly keys: Pick<KeyService, "refundCredits"> };
  state: RouteState;
  docsUrl: string;
  log: FastifyBaseLogger;
  telemetry: RequestTelemetry;
  /** Where every request a route took is recorded for analytics, once answered. */
  events: EventSink<GatewayRequestEvent>;
  /** Arrival times of those events. */
  clock: Clock;
  /** Told how each route's upstream answered (metrics). */
  upstreams: UpstreamObserver;
  /** Paths the application serves itself (e.g. /metrics) even where a route's prefix covers them. */
  servedByApplication: (path: string) => boolean;
}

/**
 * The gateway face of keygate, ahead of Fastify in the server's request listener: a request a route takes is
 * verified on the one verification path (key, permission query, named limits, namespace limits and credits, all
 * or nothing) and, when allowed, streamed to the route's upstream and back; every other request (/v2, unknown
 * paths) is left to the application. Routes are read once per request from `state`, so a reload never changes a
 * request in flight.
 */
export class Gateway {
  readonly decider: GatewayDecider;
  /** Analytics events of the requests a route took (WebSocket upgrades record theirs here too). */
  readonly events: GatewayRequestEvents;
  private readonly options: GatewayOptions;
  private readonly upstream = new UpstreamClient();
  private closing = false;

  constructor(options: GatewayOptions) {
    this.options = options;
    this.decider = new GatewayDecider(options.services, options.state, options.log);
    this.events = new GatewayRequestEvents(options.events, options.clock, this.decider);
  }

  /** Takes the request when a route does (answering it in full) and says so; false leaves it to the application. */
  handle(request: IncomingMessage, response: ServerResponse): boolean {
    const url = request.url ?? "/";
    // The /v2 API, spelt plainly (the route table also refuses its escaped spellings).
    if (url.startsWith("/v2/")) return false;
    const queryAt = url.indexOf("?");
    const path = queryAt === -1 ? url : url.slice(0, queryAt);
    if (this.options.servedByApplication(path)) return false;
    const method = request.method ?? "GET";
    const matched = this.decider.match({ method, url });
    // A URL that does not decode is the application's to refuse (malformed_url), as for every path.
    if ("kind" in matched && (matched.kind === "unmatched" || decodedPath(path) === undefined)) return false;

    const remoteAddress = request.socket.remoteAddress;
    const routed = !("kind" in matched);
    const exchange: Exchange = {
      id: newId("req"),
      request,
      response,
      time: this.events.now(),
      startedAt: performance.now(),
      route: routed ? matched.route : undefined,
      state: routed ? matched.state : this.options.state.current,
      remoteAddress,
    };
    // Closed once the answer is sent or the client went away, whichever the request came to.
    if (routed || this.options.telemetry.enabled) whenAnswerCloses(request, response, () => this.answered(exchange));
    const refusal = this.closing ? shuttingDownError() : unservableRequest(request);
    if (refusal) {
      logServerError(this.options.log, refusal, exchange.id);
      this.answerError(exchange, refusal);
    } else if ("kind" in matched) this.answerError(exchange, matched.error);
    else
      this.verifyAndForward(exchange, matched, {
        id: exchange.id,
        method,
        url,
        headers: request.headers,
        remoteAddress,
      });
    return true;
  }

  /** From now on every request a route takes is refused (503) with `Connection: close`: keygate is closing. */
  startClosing(): void {
    this.closing = true;
  }

  /** Closes the pooled upstream connections; call once no request is in flight. */
  async close(): Promise<void> {
    await this.upstream.close();
  }

  /** Gives back the credits of an allowed request whose upstream failed (WebSocket upgrades use it too). */
  refund(decision: Allowed): Promise<void> {
    return refundAfterUpstreamFailure(this.options.services.keys, this.options.log, decision);
  }

  private verifyAndForward(exchange: Exchange, matched: Matched, request: GatewayRequest): void {
    this.decider
      .verify(matched, request)
      .then((decision) => {
        noteDecision(exchange, decision);
        if (decision.kind === "allow") return this.forward(exchange, decision);
        return this.answerError(exchange, decision.error);
      })
      .catch((error: unknown) => this.answerUnexpected(exchange, error));
  }

  private forward(exchange: Exchange, decision: Allowed): void {
    const { request, response, id } = exchange;
    const { route, caller } = decision;
    // Gone while its key was verified: nothing is sent upstream, so its credits come back.
    if (clientGone(request)) return void this.clientLeft(exchange, decision, false);
    const startedAt = performance.now();
    exchange.upstreamSentAt = startedAt;
    exchange.upstreamCall = new UpstreamAbort();
    const headers = upstreamHeaders(route, request.headers, caller, {
      peer: exchange.remoteAddress,
      protocol: "encrypted" in request.socket ? "https" : "http",
      host: request.headers.host,
    });
    const call = {
      origin: route.upstream.origin,
      path: upstreamPath(route, request.url ?? "/"),
      method: request.method ?? "GET",
      headers,
      body: hasBody(request) ? request : null,
      timeoutMs: route.config.timeoutMs ?? decision.state.settings.upstreamTimeoutMs,
      signal: exchange.upstreamCall,
    };
    this.upstream
      .call(call, (statusCode, upstreamHeaders) => {
        this.options.upstreams.upstreamAnswered(route.name, (performance.now() - startedAt) / 1000);
        const head: OutgoingHttpHeaders = { "x-request-id": id, ...decision.headers, ...endToEndHeaders(upstreamHeaders, "response") };
        // The rest of a request body the upstream did not wait for is not read: the connection cannot be reused.
        if (bodyStillArriving(request)) head.connection = "close";
        exchange.head = head;
        if (statusCode >= 500 && refundDue(decision)) return this.answerAfterRefund(exchange, decision, statusCode, head);
        response.writeHead(statusCode, head);
        return response;
      })
      .catch((error: unknown) => this.upstreamFailed(exchange, decision, error));
  }

  /** A 5xx of the upstream reaches the client once its credits are back; its body waits in a buffer meanwhile. */
  private answerAfterRefund(exchange: Exchange, decision: Allowed, statusCode: number, head: OutgoingHttpHeaders): Writable {
    const body = new PassThrough();
    body.once("finish", () => {
      exchange.upstreamEndedAt = performance.now();
    });
    void this.refund(decision).then(() => {
      if (exchange.response.destroyed) return void body.destroy();
      exchange.response.writeHead(statusCode, head);
      pipeline(body, exchange.response, () => {});
    });
    return body;
  }

  private upstreamFailed(exchange: Exchange, decision: Allowed, error: unknown): void {
    const { request, response } = exchange;
    const { route } = decision;
    exchange.upstreamEndedAt = performance.now();
    // The answer was under way: all the client can be told is that the connection ends.
    if (response.headersSent) return void response.destroy();
    // A client that went away broke the upstream request (mid-upload, or by leaving before the answer began, which
    // aborts the call): not the upstream's failure.
    if (clientGone(request)) return void this.clientLeft(exchange, decision, exchange.upstreamCall?.sent === true);
    this.options.log.warn({ err: error, requestId: exchange.id, route: route.name, upstream: route.upstream.origin }, "upstream failed");
    const kind = upstreamErrorKind(error);
    this.options.upstreams.upstreamFailed(route.name, kind);
    void this.refund(decision).then(() => this.answerError(exchange, upstreamFailure(route, kind === "timeout")));
  }

  /**
   * The client closed its connection before its answer began. Credits come back unless the whole request was
   * `delivered` to the upstream (written by undici): one it had may have been acted on.
   */
  private clientLeft(exchange: Exchange, decision: Allowed, delivered: boolean): void {
    const { response } = exchange;
    this.options.log.info(
      { requestId: exchange.id, code: "err:user:bad_request:client_closed_request" },
      "the client closed the connection before its request was read or answered",
    );
    response.statusCode = 499;
    if (delivered) return void response.destroy();
    void this.refund(decision).then(() => response.destroy());
  }

  private answerUnexpected(exchange: Exchange, error: unknown): void {
    if (isKeygateError(error)) logServerError(this.options.log, error, exchange.id);
    else this.options.log.error({ err: error, requestId: exchange.id }, "unexpected error");
    this.answerError(exchange, isKeygateError(error) ? error : unexpectedError());
  }

  /** `error` in the envelope, as sendError words it. */
  private answerError(exchange: Exchange, error: KeygateError): void {
    const { id, request, response } = exchange;
    if (response.headersSent || response.destroyed) return;
    const { status, headers, body } = errorAnswer(id, error, this.options.docsUrl);
    // Answered before the request body arrived: the rest of it is not read (see closeWhenAnsweredEarly).
    if (bodyStillArriving(request) || this.closing) headers.connection = "close";
    exchange.head = headers;
    response.writeHead(status, headers).end(body);
  }

  /** The answer closed: it was sent, or its client went away. */
  private answered(exchange: Exchange): void {
    const { response } = exchange;
    // The client went away: an upstream call still waiting for its answer is not left to run until its timeout.
    if (!response.writableFinished) exchange.upstreamCall?.abort();
    if (exchange.route !== undefined) {
      this.events.record(exchange as ServedRequest, response.headersSent ? response.statusCode : undefined, exchange.head);
    }
    if (this.options.telemetry.enabled) this.reportTelemetry(exchange);
  }

  private reportTelemetry(exchange: Exchange): void {
    const { request, response } = exchange;
    this.options.telemetry.answered(
      {
        face: "gateway",
        route: exchange.route?.name ?? "unmatched",
        method: request.method ?? "GET",
        url: request.url ?? "/",
        status: response.statusCode,
        durationMs: performance.now() - exchange.startedAt,
        keyId: exchange.keyId,
        client: exchange.remoteAddress,
      },
      this.options.log,
      exchange.id,
    );
  }
}

/** One request the gateway took, and what its analytics event, the access log and the metrics say of it. */
interface Exchange extends Omit<ServedRequest, "route"> {
  response: ServerResponse;
  /** The route that took it; undefined for a request refused before any route could (a dot segment, a method). */
  route: CompiledRoute | undefined;
  /** The head of the answer, as written. */
  head?: OutgoingHttpHeaders;
  /** The upstream call of a forwarded request, to abort when the client goes away. */
  upstreamCall?: UpstreamAbort;
}

/** Whether part of a request's body has yet to arrive (`complete` alone is false for a bodyless request at first). */
function bodyStillArriving(request: IncomingMessage): boolean {
  return !request.complete && hasBody(request);
}

/** Whether a request has a body to stream (RFC 9112 §6.3: a length, or a transfer coding). */
function hasBody(request: IncomingMessage): boolean {
  const length = request.headers["content-length"];
  return request.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}
