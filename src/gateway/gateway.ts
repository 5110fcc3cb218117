import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { FastifyBaseLogger } from "fastify";
import type { EventSink, GatewayRequestEvent } from "../domain/analytics/events.js";
import type { KeyService } from "../domain/keys/key-service.js";
import { isKeygateError, KeygateError } from "../errors/keygate-error.js";
import { whenAnswerCloses } from "../http/answer-closed.js";
import { answerOnSocket, errorAnswer } from "../http/error-envelope.js";
import { logServerError, unexpectedError } from "../http/error-handler.js";
import { closeAfterAnswer, isHttp2 } from "../http/http2.js";
import type { UpstreamObserver } from "../http/metrics.js";
import { refusalAtTheDoor } from "../http/protocol-checks.js";
import { type RequestTarget, splitTarget } from "../http/request-target.js";
import type { RequestTelemetry } from "../http/request-telemetry.js";
import type { Clock } from "../lib/clock.js";
import { newId } from "../lib/ids.js";
import { BodyCapture } from "./body-capture.js";
import { noteCors, type Preflight, preflightHeaders, preflightOf } from "./cors.js";
import { type Allowed, type Decision, type DecisionServices, GatewayDecider, type RouteMatch } from "./decision.js";
import { allowedHeaders, doorRequest, type OriginalRequest, originalRequest } from "./forward-auth.js";
import { upstreamHeaders, upstreamPath } from "./forwarding.js";
import type { GatewayRequest } from "./gateway-request.js";
import type { CurrentGatewaySnapshot, GatewaySnapshot } from "./gateway-snapshot.js";
import { loopRefusal, viaEntry } from "./loop-detection.js";
import { bodyStillArriving, PlainForwarding } from "./plain-forwarding.js";
import { GatewayRequestEvents, noteDecision } from "./request-events.js";
import type { CompiledRoute, DecisionRoute } from "./route-table.js";
import { noHealthyUpstream, refundCredits, upstreamFailure } from "./upstream-failure.js";
import type { ApiUpstreamGuard } from "./upstream-guard.js";
import { UpstreamPools } from "./upstream-pools.js";
import { relayUpgrade, upgradeRefusal } from "./websocket.js";

export interface GatewayOptions {
  services: DecisionServices & { readonly keys: Pick<KeyService, "refundCredits"> };
  snapshot: CurrentGatewaySnapshot;
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
  /** What the upstreams of routes made through the API may be (not the operator's network). */
  apiUpstreams: ApiUpstreamGuard;
  /** keygate's name in Via when `gateway.via.pseudonym` gives none (loop-detection.ts). */
  pseudonym: string;
  /** The IPv6 prefix a per-address rate limit counts a client by (`ratelimit.ipv6PrefixLength`). */
  ipv6PrefixLength: number;
}

/**
 * The gateway face of keygate, ahead of Fastify in the server's request listener, and the server's only listener
 * for upgrades. A request a route takes is verified on the one verification path (key, permission query, named
 * limits, namespace limits and credits, all or nothing) and, when allowed, streamed to the route's upstream and back
 * (a plain request), or relayed to it (a WebSocket upgrade). Both doors share one prelude: the request id, the
 * refusals at the door (closing, Host, Expect), the route match, the error answers in the envelope, and once the
 * answer closes, the analytics event, the metrics and the access log line. docs/architecture.md#edge-duties lists
 * who does what at each door.
 */
export class Gateway {
  private readonly options: GatewayOptions;
  private readonly decider: GatewayDecider;
  private readonly events: GatewayRequestEvents;
  private readonly plain: PlainForwarding;
  /** Each route's upstream targets and their health on this process (getRoute and the metrics show them). */
  readonly pools: UpstreamPools;
  private closing = false;

  constructor(options: GatewayOptions) {
    this.options = options;
    this.decider = new GatewayDecider(options.services, options.log, options.ipv6PrefixLength);
    this.events = new GatewayRequestEvents(options.events, options.clock, this.decider);
    this.pools = new UpstreamPools({
      clock: options.clock,
      log: options.log,
      snapshot: options.snapshot,
      apiUpstreams: options.apiUpstreams,
    });
    this.plain = new PlainForwarding({
      log: options.log,
      upstreams: options.upstreams,
      refund: (request, decision) => this.refund(request, decision),
      answerError: (request, response, error) => this.answerError(request, response, error),
      unexpected: (request, response, error) => this.unexpected(request, response, error),
      pools: this.pools,
      pseudonym: (snapshot) => this.pseudonym(snapshot),
    });
  }

  /**
   * A plain request: taken when it is the forward-auth door's or a route takes it (or refuses it), and then answered
   * in full; false leaves it to the application (/v2, the application's own paths, paths no route takes, and URLs that do not decode).
   */
  handle(raw: IncomingMessage, response: ServerResponse): boolean {
    const target = splitTarget(raw.url ?? "/");
    const snapshot = this.options.snapshot.current;
    const asked = doorRequest(snapshot.settings.forwardAuth, target.path, raw.url ?? "/");
    if (asked) {
      this.askedAtTheDoor(raw, response, snapshot, asked.appended);
      return true;
    }
    if (this.options.servedByApplication(target.path)) return false;
    // A CORS preflight belongs to the route that takes the method it asks about, when that route answers it.
    const preflight = preflightOf(raw, target, (method) => this.decider.match(snapshot, method, target.path));
    const match = preflight?.match ?? this.decider.match(snapshot, raw.method ?? "GET", target.path);
    if (match.kind === "none" || match.kind === "undecodable") return false;

    const request = this.arrived(raw, target, snapshot, match);
    if (match.kind === "route" && match.route.cors.length > 0) noteCors(request, match.route, preflight?.policy);
    // Closed once the answer is sent or the client went away, whichever the request came to.
    whenAnswerCloses(raw, response, () => this.answered(request, response));
    const refusal = refusalAtTheDoor(raw, this.closing) ?? (match.kind === "refused" ? match.error : this.loop(request));
    if (refusal) this.refuse(request, refusal, (error) => this.answerError(request, response, error));
    else if (preflight) this.answerPreflight(request, response, preflight);
    else if (match.kind === "route") {
      void this.decide(request, match.route)
        .then((decision) => {
          if (decision.kind === "deny") return this.answerError(request, response, decision.error);
          this.plain.forward(request, response, match.route, decision);
        })
        .catch((error: unknown) => this.unexpected(request, response, error));
    }
    return true;
  }

  /**
   * A request to the forward-auth door: a proxy asks about the request its headers name (forward-auth.ts), decided
   * on the route its path matches as the inline gateway decides one, and answered 200 with the route's identity
   * headers and the RateLimit headers, or refused in the envelope; nothing is forwarded and no body is read. Credits
   * are spent at the decision, for good: there is no upstream answer to give them back on. Via is not checked: the
   * door forwards nothing, so no loop can pass through it.
   */
  private askedAtTheDoor(raw: IncomingMessage, response: ServerResponse, snapshot: GatewaySnapshot, appended: string | undefined): void {
    const original = originalRequest(raw.headers, raw.method ?? "GET", appended);
    const known = !(original instanceof KeygateError);
    const match = known ? this.decider.matchAtDoor(snapshot, original.method, original.path) : undefined;
    const request = this.arrived(
      raw,
      known ? original : splitTarget(raw.url ?? "/"),
      snapshot,
      match ?? NOT_ASKED,
      known ? original : undefined,
    );
    request.forwardAuth = true;
    if (known && original.host !== undefined) request.host = original.host;
    whenAnswerCloses(raw, response, () => this.answered(request, response));
    const answerError = (error: KeygateError) => this.answerError(request, response, error);
    const refusal =
      refusalAtTheDoor(raw, this.closing) ?? (known ? undefined : original) ?? (match?.kind === "refused" ? match.error : undefined);
    if (refusal) this.refuse(request, refusal, answerError);
    if (refusal || match?.kind !== "route") return;
    const route = match.route;
    void this.decide(request, route)
      .then((decision) => {
        if (decision.kind === "deny") return answerError(decision.error);
        const headers = allowedHeaders(route, decision, request.id);
        this.closeIfDue(raw, headers);
        [request.status, request.head] = [200, headers];
        response.writeHead(200, headers).end();
      })
      .catch((error: unknown) => this.unexpected(request, response, error));
  }

  /**
   * A WebSocket (or any HTTP/1.1) upgrade: Fastify serves none, so every one is the gateway's. One a route takes is
   * decided as a plain request is, then relayed to the route's upstream; every other is refused on its socket.
   */
  handleUpgrade(raw: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on("error", () => socket.destroy());
    const target = splitTarget(raw.url ?? "/");
    const snapshot = this.options.snapshot.current;
    const match: RouteMatch = this.options.servedByApplication(target.path)
      ? { kind: "none" }
      : this.decider.match(snapshot, raw.method ?? "GET", target.path);
    const request = this.arrived(raw, target, snapshot, match);
    let closed = false;
    const answered = () => {
      if (closed) return;
      closed = true;
      this.answered(request, undefined);
    };
    // The answer is written ('finish'), or the client went away ('close'), whichever comes first.
    socket.once("finish", answered);
    socket.once("close", answered);
    const answerError = (error: KeygateError) => {
      const answer = answerOnSocket(socket, request.id, error, this.options.docsUrl);
      if (answer) [request.status, request.head] = [answer.status, answer.headers];
    };
    const refusal = refusalAtTheDoor(raw, this.closing) ?? upgradeRefusal(match, target.path) ?? this.loop(request);
    if (refusal) this.refuse(request, refusal, answerError);
    else if (match.kind === "route") this.decideAndRelay(request, match.route, socket, head, answerError, answered);
  }

  /** Verifies an upgrade `route` took and, when allowed, relays it to the route's upstream. */
  private decideAndRelay(
    request: GatewayRequest,
    route: CompiledRoute,
    socket: Duplex,
    head: Buffer,
    answerError: (error: KeygateError) => void,
    answered: () => void,
  ): void {
    const raw = request.raw;
    // A failure nothing else caught (a bug): logged, and answered on the socket while nothing else was.
    const unexpected = (error: unknown) => {
      this.options.log.error({ err: error, requestId: request.id }, "unexpected error");
      answerError(unexpectedError());
    };
    void this.decide(request, route)
      .then((decision) => {
        if (decision.kind === "deny") return answerError(decision.error);
        const { pool } = this.pools.of(route);
        const target = pool.pick();
        if (target === undefined) {
          return void this.refund(request, decision)
            .then(() => answerError(noHealthyUpstream(route)))
            .catch(unexpected);
        }
        request.upstreamSentAt = performance.now();
        const call = pool.once(target);
        socket.once("close", () => call.released());
        const pseudonym = this.pseudonym(request.snapshot);
        const protocol = "encrypted" in socket ? "https" : "http";
        const client = { peer: request.remoteAddress, protocol, host: raw.headers.host, via: viaEntry(raw, pseudonym) };
        relayUpgrade(raw, socket, head, {
          target: target.origin + upstreamPath(route, request),
          headers: upstreamHeaders(route, raw.headers, decision.verification, client, target.url),
          tls: route.pool.tls,
          guard: route.definition.source === "api" ? this.options.apiUpstreams.upgrade : undefined,
          timeoutMs: route.definition.timeoutMs ?? request.snapshot.settings.upstreamTimeoutMs,
          requestId: request.id,
          pseudonym,
          onAnswer: (status, lines) => {
            call.answered(status);
            [request.status, request.head] = [status, lines];
            // A switched connection may stay open for hours: the request it began as is answered now.
            if (status === 101) answered();
          },
          onUpstreamFailure: (kind, error) => {
            call.failed();
            request.upstreamEndedAt = performance.now();
            this.options.log.warn({ err: error, requestId: request.id, route: route.name }, "upstream failed an upgrade");
            this.options.upstreams.upstreamFailed(route.name, kind);
            void this.refund(request, decision)
              .then(() => answerError(upstreamFailure(route, kind === "timeout", error)))
              .catch(unexpected);
          },
        });
      })
      .catch(unexpected);
  }

  /** keygate's name in the Via of what it forwards. */
  private pseudonym(snapshot: GatewaySnapshot): string {
    return snapshot.settings.via.pseudonym ?? this.options.pseudonym;
  }

  /** 508 for a request a route took that has come through this keygate already, or through too many proxies. */
  private loop(request: GatewayRequest): KeygateError | undefined {
    if (request.route === undefined) return undefined;
    const { via } = request.snapshot.settings;
    return loopRefusal(request.raw.headers.via, via.pseudonym ?? this.options.pseudonym, via.maxHops);
  }

  /** From now on every request the gateway takes is refused (503) with `Connection: close`: keygate is closing. */
  startClosing(): void {
    this.closing = true;
  }

  /** Stops the health probes and closes the pooled upstream connections; call once no request is in flight. */
  async close(): Promise<void> {
    await this.pools.close();
  }

  /**
   * A request the gateway took, as it arrived; `match` names its route when one takes it. `original`: the request a
   * proxy asks the forward-auth door about, which stands in for the auth request's own method and target.
   */
  private arrived(
    raw: IncomingMessage,
    target: RequestTarget,
    snapshot: GatewayRequest["snapshot"],
    match: RouteMatch<DecisionRoute>,
    original?: Pick<OriginalRequest, "method" | "url">,
  ): GatewayRequest {
    // Written out, not spread: an object literal that adds properties after a spread costs microseconds.
    const request: GatewayRequest = {
      id: newId("req"),
      raw,
      method: original?.method ?? raw.method ?? "GET",
      url: original?.url ?? raw.url ?? "/",
      path: target.path,
      query: target.query,
      remoteAddress: raw.socket.remoteAddress,
      time: this.events.now(),
      startedAt: performance.now(),
      snapshot,
    };
    if (match.kind === "route") request.route = match.route;
    return request;
  }

  /** Answers a refusal at the door or of the route match; a 5xx has its cause logged. */
  private refuse(request: GatewayRequest, error: KeygateError, answer: (error: KeygateError) => void): void {
    logServerError(this.options.log, error, request.id);
    answer(error);
  }

  /**
   * Verifies a request `route` took. Never rejects: a failure (a store that does not answer, say) is a denial with
   * its catalogue error, logged when it is a 5xx; anything unexpected a logged 500.
   */
  private async decide(request: GatewayRequest, route: DecisionRoute): Promise<Decision> {
    let decision: Decision;
    try {
      decision = await this.decider.decide(request, route);
    } catch (error) {
      if (isKeygateError(error)) logServerError(this.options.log, error, request.id);
      else this.options.log.error({ err: error, requestId: request.id }, "unexpected error");
      return { kind: "deny", error: isKeygateError(error) ? error : unexpectedError() };
    }
    noteDecision(request, decision);
    return decision;
  }

  /** Gives back the credits of an allowed request whose upstream failed, or that was never sent. */
  private refund(request: GatewayRequest, decision: Allowed): Promise<void> {
    return refundCredits(this.options.services.keys, this.options.log, request, decision);
  }

  /** A preflight its route's cors policy answers: 204 for an allowed origin, else 403 without any CORS header. */
  private answerPreflight(request: GatewayRequest, response: ServerResponse, preflight: Preflight): void {
    const headers = preflightHeaders(preflight, request);
    if (headers === undefined) {
      const detail = `The origin is not allowed by the route's cors policy '${preflight.policy.name}'.`;
      return void this.answerError(request, response, new KeygateError("err:keygate:gateway:request_denied", detail));
    }
    this.closeIfDue(request.raw, headers);
    [request.status, request.head] = [204, headers];
    response.writeHead(204, headers).end();
  }

  /**
   * A failure nothing else caught after a plain request was taken (a bug): logged with the request's id; the client
   * gets a 500 when nothing was sent yet, and the connection ends when an answer was under way.
   */
  private unexpected(request: GatewayRequest, response: ServerResponse, error: unknown): void {
    this.options.log.error({ err: error, requestId: request.id }, "unexpected error");
    if (response.headersSent) response.destroy();
    else this.answerError(request, response, unexpectedError());
  }

  /** `error` in the envelope on a plain request's response, unless an answer is already under way. */
  private answerError(request: GatewayRequest, response: ServerResponse, error: KeygateError): void {
    if (response.headersSent || response.destroyed) return;
    const { status, headers, body } = errorAnswer(request.id, error, this.options.docsUrl);
    const cors = request.cors;
    if (cors !== undefined) for (const name in cors) headers[name] = cors[name] as string;
    this.closeIfDue(request.raw, headers);
    [request.status, request.head] = [status, headers as OutgoingHttpHeaders];
    // keygate's own answer is the body the client gets: it replaces what was captured of a failed upstream's.
    if (request.capture?.responseBody) request.responseBody = BodyCapture.of(body);
    response.writeHead(status, headers).end(body);
  }

  /**
   * Ends the connection with keygate's own answer when it came before the request body arrived (the rest is not read:
   * see closeWhenAnsweredEarly), or while keygate closes. HTTP/2 has no Connection header (a closing keygate's 503
   * has one): its stream alone ends, and a closing keygate ends the connection with GOAWAY.
   */
  private closeIfDue(raw: IncomingMessage, headers: Record<string, unknown>): void {
    const http2 = isHttp2(raw);
    if (http2) delete headers.connection;
    if (bodyStillArriving(raw) && closeAfterAnswer(raw)) headers.connection = "close";
    else if (this.closing && !http2) headers.connection = "close";
  }

  /**
   * The answer closed: it was sent, or its client went away (`response`, a plain request's, then has not finished).
   * Called once per request.
   */
  private answered(request: GatewayRequest, response: ServerResponse | undefined): void {
    // The client went away: an upstream call still waiting for its answer is not left to run until its timeout.
    if (response !== undefined && !response.writableFinished) request.upstreamCall?.abort();
    if (request.route !== undefined) this.events.record(request, request.route);
    const telemetry = this.options.telemetry;
    if (!telemetry.enabled) return;
    telemetry.answered(
      {
        face: request.forwardAuth ? "forward_auth" : "gateway",
        route: request.route?.name ?? "unmatched",
        method: request.method,
        url: request.url,
        status: request.status ?? 499,
        durationMs: performance.now() - request.startedAt,
        keyId: request.keyId,
        client: request.remoteAddress,
      },
      this.options.log,
      request.id,
    );
  }
}

/** The forward-auth door's stand-in match for a request that does not say what it asks about. */
const NOT_ASKED: RouteMatch<DecisionRoute> = { kind: "none" };
