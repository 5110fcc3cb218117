import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from "fastify";
import type { Face, Metrics } from "./metrics.js";
import { isManagementPath, splitTarget } from "./request-target.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The id of the root key the request was made with, once known; never the key. */
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

/** An answered request, as the metrics count it and the access log writes it. */
export interface AnsweredRequest {
  face: Face;
  /** A procedure, a gateway route, or "unmatched": a bounded set of names. */
  route: string;
  method: string;
  /** As received: keys in the query are masked in the log like everywhere else (LogRedaction). */
  url: string;
  status: number;
  durationMs: number;
  /** The key (gateway) or root key (/v2) the request was made with, once known. */
  keyId: string | undefined;
  client: string | undefined;
}

/**
 * Counts every answered request in the metrics and writes its access log line (`logging.requests`). Both faces
 * report here: /v2 through a Fastify hook (fastifyRequestTelemetry), the gateway from its own request listener.
 */
export class RequestTelemetry {
  private readonly metrics: Metrics | undefined;
  private readonly sampled: () => boolean;
  /** false when metrics and the access log are both off: nothing needs to be told. */
  readonly enabled: boolean;

  constructor(options: TelemetryOptions) {
    const { metrics, accessLog } = options;
    const random = options.random ?? Math.random;
    this.metrics = metrics;
    this.sampled = accessLog === true ? () => true : accessLog === false ? () => false : () => random() < accessLog;
    this.enabled = metrics !== undefined || accessLog !== false;
  }

  /** `log` carries the request id (a request's child logger, or a line field). */
  answered(request: AnsweredRequest, log: FastifyBaseLogger, requestId?: string): void {
    this.metrics?.request(request.face, request.route, request.status, request.durationMs / 1000);
    if (!this.sampled()) return;
    const line = {
      face: request.face,
      route: request.route,
      method: request.method,
      url: request.url,
      status: request.status,
      durationMs: Math.round(request.durationMs * 1000) / 1000,
      keyId: request.keyId,
      client: request.client,
    };
    log.info(requestId === undefined ? line : { requestId, ...line }, "request");
  }
}

type Named = { face: Face; route: string };

const UNMATCHED_V2: Named = { face: "v2", route: "unmatched" };
const UNMATCHED_GATEWAY: Named = { face: "gateway", route: "unmatched" };

/**
 * Each route pattern's face and name, worked out once: the same name object every time also spares the metrics'
 * lookups hashing a new string per request. Bounded by the app's routes.
 */
const namesOfPatterns = new Map<string, Named>();

/** The face and the bounded name a request Fastify answered is counted under: a procedure, or "unmatched". */
export function faceAndRoute(request: FastifyRequest): Named {
  const pattern = request.routeOptions.url;
  // No route took it: a /v2 path no procedure has, or a path no gateway route takes.
  if (pattern === undefined) return isManagementPath(splitTarget(request.url).path) ? UNMATCHED_V2 : UNMATCHED_GATEWAY;
  let named = namesOfPatterns.get(pattern);
  if (named === undefined) {
    named = pattern.startsWith("/v2/") ? { face: "v2", route: pattern.slice("/v2/".length) } : { face: "other", route: pattern };
    namesOfPatterns.set(pattern, named);
  }
  return named;
}

/** Tells `telemetry` of every request Fastify answers, once the response is sent. Nothing when it is off. */
export function fastifyRequestTelemetry(app: FastifyInstance, telemetry: RequestTelemetry): void {
  app.decorateRequest("keyId", undefined);
  if (!telemetry.enabled) return;
  // Callback style: an async hook costs a promise per request.
  app.addHook("onResponse", (request, reply, done) => {
    const { face, route } = faceAndRoute(request);
    telemetry.answered(
      {
        face,
        route,
        method: request.method,
        url: request.url,
        status: reply.statusCode,
        durationMs: reply.elapsedTime,
        keyId: request.keyId,
        client: request.socket.remoteAddress,
      },
      request.log,
    );
    done();
  });
}
