import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { FastifyInstance } from "fastify";
import { KeygateError } from "../errors/keygate-error.js";
import { answerOnSocket, logServerError, unexpectedError } from "../http/error-handler.js";
import type { UpstreamObserver } from "../http/metrics.js";
import { newId } from "../lib/ids.js";
import type { Allowed, Decision, GatewayRequest } from "./decision.js";
import { upstreamHeaders, upstreamUrl } from "./forwarding.js";
import { upstreamFailure } from "./upstream-failure.js";
import { relayUpgrade } from "./websocket.js";

/**
 * WebSocket upgrades bypass Fastify's routing: each is decided with the same checks as a plain request, then
 * relayed to the route's upstream; refusals are written to the socket as the usual error bodies.
 */
export interface UpgradeOptions {
  decide: (request: GatewayRequest) => Promise<Decision>;
  refund: (decision: Allowed) => Promise<void>;
  docsUrl: string;
  upstreams: UpstreamObserver;
}

export function relayUpgrades(app: FastifyInstance, { decide, refund, docsUrl, upstreams }: UpgradeOptions): void {
  const answerRaw = (socket: Duplex, requestId: string, error: KeygateError) => answerOnSocket(socket, requestId, error, docsUrl);
  const onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    const id = newId("req");
    socket.on("error", () => socket.destroy());
    decide({
      id,
      method: request.method ?? "GET",
      url: request.url ?? "/",
      headers: request.headers,
      remoteAddress: request.socket.remoteAddress,
    })
      .then((decision) => {
        if (decision.kind === "unmatched")
          return answerRaw(
            socket,
            id,
            new KeygateError("err:user:bad_request:route_not_found", `No route takes upgrades at ${(request.url ?? "/").split("?")[0]}.`),
          );
        if (decision.kind === "deny") return answerRaw(socket, id, decision.error);
        const { route, state: current, caller } = decision;
        const headers = upstreamHeaders(route, request.headers, caller, {
          peer: request.socket.remoteAddress,
          protocol: "encrypted" in request.socket ? "https" : "http",
          host: request.headers.host,
        });
        relayUpgrade(request, socket, head, {
          target: upstreamUrl(route, request.url ?? "/"),
          headers,
          timeoutMs: route.config.timeoutMs ?? current.settings.upstreamTimeoutMs,
          requestId: id,
          onUpstreamFailure: (kind, error) => {
            app.log.warn({ err: error, route: route.name }, "upstream failed an upgrade");
            upstreams.upstreamFailed(route.name, kind);
            void refund(decision).then(() => answerRaw(socket, id, upstreamFailure(route, kind === "timeout")));
          },
        });
      })
      .catch((error: unknown) => {
        if (error instanceof KeygateError) {
          logServerError(app.log, error, id);
          return answerRaw(socket, id, error);
        }
        app.log.error({ err: error, requestId: id }, "unexpected error on an upgrade");
        answerRaw(socket, id, unexpectedError());
      });
  };
  app.server.on("upgrade", onUpgrade);
  app.addHook("onClose", async () => {
    app.server.off("upgrade", onUpgrade);
  });
}
