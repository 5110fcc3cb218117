import replyFrom from "@fastify/reply-from";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { answerClientClosed, sendError } from "../http/error-handler.js";
import type { UpstreamErrorKind, UpstreamObserver } from "../http/metrics.js";
import { type Allowed, GatewayDecider, type GatewayRequest } from "./decision.js";
import { upstreamHeaders, upstreamTarget } from "./forwarding.js";
import { endToEndHeaders } from "./hop-by-hop.js";
import type { RouteState } from "./route-state.js";
import { relayUpgrades } from "./upgrades.js";
import { refundAfterUpstreamFailure, upstreamFailure } from "./upstream-failure.js";

export interface GatewayOptions {
  state: RouteState;
  docsUrl: string;
  /** Answers a request no route takes (404, or 405 for a known path), as the rest of keygate does. */
  unmatched: (request: FastifyRequest, reply: FastifyReply) => FastifyReply;
  /** Told how each route's upstream answered (metrics). */
  upstreams: UpstreamObserver;
}

/**
 * The gateway face of keygate: every request that is not for /v2 is matched against the routes, verified with
 * the one verification path (key, permission query, named limits, namespace limits and credits, all or nothing)
 * and, when allowed, streamed to the route's upstream; WebSocket upgrades pass the same checks. Routes are read
 * once per request from `state`, so a reload never changes a request in flight.
 */
export async function gateway(app: FastifyInstance, options: GatewayOptions): Promise<void> {
  const { state, docsUrl, upstreams } = options;
  await app.register(replyFrom, {
    undici: { connections: 128, pipelining: 1, keepAliveTimeout: 60_000 },
    disableRequestLogging: true,
    // A failing upstream is answered, never retried: retries would multiply the load on it.
    maxRetriesOn503: 0,
  });
  // Bodies stream through to the upstream unparsed and unbuffered, whatever their type and size.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_request, payload, done) => done(null, payload));

  const decider = new GatewayDecider(app.services, state, app.log);
  const decide = (request: GatewayRequest) => decider.decide(request);

  const refund = (decision: Allowed) => refundAfterUpstreamFailure(app.services.keys, app.log, decision);

  const handler = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const decision = await decide({
      id: request.id,
      method: request.method,
      url: request.url,
      headers: request.headers,
      remoteAddress: request.socket.remoteAddress,
    });
    if (decision.kind === "unmatched") return options.unmatched(request, reply);
    request.gatewayRoute = decision.route?.name;
    if (decision.kind === "deny") return sendError(reply, request, docsUrl, decision.error);
    const { route, state: current, caller } = decision;
    request.keyId = caller.keyId;
    reply.headers(decision.headers);
    const startedAt = performance.now();
    const target = upstreamTarget(route, request.url);
    // The query goes apart from the URL: reply-from percent-decodes the URL it is given (to look for ".."), which
    // throws on a stray "%"; and a query is the upstream's to read, whatever it holds.
    return reply.from(target.url, {
      queryString: () => target.query,
      timeout: route.config.timeoutMs ?? current.settings.upstreamTimeoutMs,
      rewriteRequestHeaders: (_request, headers) =>
        upstreamHeaders(route, headers, caller, {
          peer: request.socket.remoteAddress,
          protocol: request.protocol,
          host: request.headers.host,
        }),
      // The upstream's hop-by-hop headers describe its connection to keygate: Node sets the client's own.
      rewriteHeaders: (headers) => endToEndHeaders(headers, "response"),
      onResponse: (_request, upstreamReply, response) => {
        upstreams.upstreamAnswered(route.name, (performance.now() - startedAt) / 1000);
        if (response.statusCode < 500) return void upstreamReply.send(response.stream);
        void refund(decision).then(() => upstreamReply.send(response.stream));
      },
      onError: (upstreamReply, { error }) => {
        // A client that goes away mid-upload breaks the upstream request too: not the upstream's failure.
        if (request.socket.destroyed)
          return void refund(decision).then(() => answerClientClosed(upstreamReply as FastifyReply, request, docsUrl));
        request.log.warn({ err: error, route: route.name, upstream: route.upstream.origin }, "upstream failed");
        const kind = upstreamErrorKind(error);
        upstreams.upstreamFailed(route.name, kind);
        void refund(decision).then(() =>
          sendError(upstreamReply as FastifyReply, request, docsUrl, upstreamFailure(route, kind === "timeout")),
        );
      },
    });
  };

  const methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
  app.route({ method: methods, url: "/*", exposeHeadRoute: false, handler });
  app.route({ method: methods, url: "/", exposeHeadRoute: false, handler });

  relayUpgrades(app, { decide, refund, docsUrl, upstreams });
}

/** How a forwarded request failed to get an answer: reply-from answers a timeout as a 504 error. */
function upstreamErrorKind(error: unknown): UpstreamErrorKind {
  if ((error as { statusCode?: number }).statusCode === 504) return "timeout";
  const code = (error as { code?: string }).code ?? (error as { cause?: { code?: string } }).cause?.code;
  return code === "ECONNRESET" || code === "UND_ERR_SOCKET" || code === "EPIPE" ? "reset" : "unreachable";
}
