import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { FastifyInstance } from "fastify";
import { KeygateError } from "../errors/keygate-error.js";
import { answerOnSocket, logServerError, unexpectedError } from "../http/error-handler.js";
import type { UpstreamObserver } from "../http/metrics.js";
import { newId } from "../lib/ids.js";
import type { Allowed, GatewayDecider } from "./decision.js";
import { upstreamHeaders, upstreamUrl } from "./forwarding.js";
import { type AnswerHeaders, type GatewayRequestEvents, noteDecision, type ServedRequest } from "./request-events.js";
import { upstreamFailure } from "./upstream-failure.js";
import { relayUpgrade } from "./websocket.js";

/**
 * WebSocket upgrades bypass Fastify's routing: each is decided with the same checks as a plain request, then
 * relayed to the route's upstream; refusals are written to the socket as the usual error bodies. An upgrade a
 * route took is recorded for analytics like a plain request: once switched (101), or once its answer is written
 * or its client went away.
 */
export interface UpgradeOptions {
  decider: Pick<GatewayDecider, "match" | "verify">;
  events: GatewayRequestEvents;
  refund: (decision: Allowed) => Promise<void>;
  docsUrl: string;
  upstreams: UpstreamObserver;
}

export function relayUpgrades(app: FastifyInstance, { decider, events, refund, docsUrl, upstreams }: UpgradeOptions): void {
  const onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    const id = newId("req");
    socket.on("error", () => socket.destroy());
    const url = request.url ?? "/";
    const method = request.method ?? "GET";
    const matched = decider.match({ method, url });
    // No route takes it (or it is refused before one could): not a gateway request, so it has no event.
    if ("kind" in matched) {
      const error =
        matched.kind === "deny"
          ? matched.error
          : new KeygateError("err:user:bad_request:route_not_found", `No route takes upgrades at ${url.split("?")[0]}.`);
      return void answerOnSocket(socket, id, error, docsUrl);
    }

    const { route, state: current } = matched;
    const remoteAddress = request.socket.remoteAddress;
    const served: ServedRequest = { id, request, route, state: current, time: events.now(), startedAt: performance.now(), remoteAddress };
    let status: number | undefined;
    let answerHeaders: AnswerHeaders | undefined;
    let recorded = false;
    const record = () => {
      if (recorded) return;
      recorded = true;
      events.record(served, status, answerHeaders);
    };
    // The answer is written ('finish'), or the client went away ('close'), whichever comes first.
    socket.once("finish", record);
    socket.once("close", record);
    const answerRaw = (error: KeygateError) => {
      const answer = answerOnSocket(socket, id, error, docsUrl);
      if (answer) [status, answerHeaders] = [answer.status, answer.headers];
    };

    decider
      .verify(matched, { id, method, url, headers: request.headers, remoteAddress })
      .then((decision) => {
        noteDecision(served, decision);
        if (decision.kind === "deny") return answerRaw(decision.error);
        const headers = upstreamHeaders(route, request.headers, decision.caller, {
          peer: remoteAddress,
          protocol: "encrypted" in socket ? "https" : "http",
          host: request.headers.host,
        });
        served.upstreamSentAt = performance.now();
        relayUpgrade(request, socket, head, {
          target: upstreamUrl(route, url),
          headers,
          timeoutMs: route.config.timeoutMs ?? current.settings.upstreamTimeoutMs,
          requestId: id,
          onAnswer: (answered, lines) => {
            [status, answerHeaders] = [answered, lines];
            // A switched connection may stay open for hours: the request it began as is answered now.
            if (answered === 101) record();
          },
          onUpstreamFailure: (kind, error) => {
            served.upstreamEndedAt = performance.now();
            app.log.warn({ err: error, route: route.name }, "upstream failed an upgrade");
            upstreams.upstreamFailed(route.name, kind);
            void refund(decision).then(() => answerRaw(upstreamFailure(route, kind === "timeout")));
          },
        });
      })
      .catch((error: unknown) => {
        if (error instanceof KeygateError) {
          logServerError(app.log, error, id);
          return answerRaw(error);
        }
        app.log.error({ err: error, requestId: id }, "unexpected error on an upgrade");
        answerRaw(unexpectedError());
      });
  };
  app.server.on("upgrade", onUpgrade);
  app.addHook("onClose", async () => {
    app.server.off("upgrade", onUpgrade);
  });
}
