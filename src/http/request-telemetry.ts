import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Face, Metrics } from "./metrics.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The gateway route that took the request, once matched (metrics and the access log name it). */
    gatewayRoute: string | undefined;
    /** The id of the key (gateway) or root key (/v2) the request was made with, once known; never the key. */
    keyId: string | undefined;
  }
}

export interface TelemetryOptions {
  /** undefined: metrics are off. */
  metrics: Metrics | undefined;
  /** logging.requests: false, true, or the fraction of requests to log. */
  accessLog: boolean | number;
  /** A number in [0, 1) for sampling; injectable for tests. */
  random?: () => number;
}

/** The face and the bounded name a request is counted under: a procedure, a gateway route, or "unmatched". */
export function faceAndRoute(request: FastifyRequest): { face: Face; route: string } {
  if (request.gatewayRoute !== undefined) return { face: "gateway", route: request.gatewayRoute };
  const pattern = request.routeOptions.url;
  if (pattern?.startsWith("/v2/")) return { face: "v2", route: pattern.slice("/v2/".length) };
  if (pattern === "/*" || pattern === "/") return { face: "gateway", route: "unmatched" };
  const path = request.url.split("?", 1)[0] as string;
  if (pattern === undefined) return { face: path === "/v2" || path.startsWith("/v2/") ? "v2" : "other", route: "unmatched" };
  return { face: "other", route: pattern };
}

/**
 * Counts every answered request in the metrics and writes the access log line, both once the response is sent.
 * Nothing is registered when both are off.
 */
export function requestTelemetry(app: FastifyInstance, options: TelemetryOptions): void {
  app.decorateRequest("gatewayRoute", undefined);
  app.decorateRequest("keyId", undefined);
  const { metrics, accessLog } = options;
  if (!metrics && accessLog === false) return;
  const random = options.random ?? Math.random;
  const sampled = accessLog === true ? () => true : accessLog === false ? () => false : () => random() < accessLog;
  // Callback style: an async hook costs a promise per request on the gateway's hot path.
  app.addHook("onResponse", (request, reply, done) => {
    const { face, route } = faceAndRoute(request);
    const seconds = reply.elapsedTime / 1000;
    metrics?.request(face, route, reply.statusCode, seconds);
    if (sampled()) {
      request.log.info(
        {
          face,
          route,
          method: request.method,
          // Keys in the query are masked like everywhere else in the log (LogRedaction).
          url: request.url,
          status: reply.statusCode,
          durationMs: Math.round(reply.elapsedTime * 1000) / 1000,
          keyId: request.keyId,
          client: request.socket.remoteAddress,
        },
        "request",
      );
    }
    done();
  });
}
