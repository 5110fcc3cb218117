import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from "node:http";
import { type FastifyBaseLogger, type FastifyHttpOptions, type FastifyServerFactory, LogController } from "fastify";
import type { KeygateConfig } from "./config/schema.js";
import type { CurrentGatewaySnapshot } from "./gateway/gateway-snapshot.js";
import type { RouteTable } from "./gateway/route-table.js";
import { clientErrorHandler } from "./http/client-errors.js";
import { answerFrameworkError } from "./http/error-handler.js";
import { NODE_CHECKS_LEFT_TO_KEYGATE } from "./http/protocol-checks.js";
import { connectionsCheckingInterval } from "./http/slow-requests.js";
import { newId } from "./lib/ids.js";
import { LogRedaction } from "./lib/log-redaction.js";

// The HTTP server keygate runs on: Fastify's options, and Node's server with the gateway's listener first.

/** Where the server's log goes. */
export interface ServerLogOptions {
  /** false silences the log (tests); otherwise the configured level applies. */
  logger?: boolean;
  /** Where log lines go instead of stdout (tests read them); each line is redacted as on stdout. */
  logStream?: { write(line: string): void };
}

/** Fastify's options: the redacted JSON log, request ids, timeouts, strict validation, errors in the envelope. */
export function serverOptions(
  config: KeygateConfig,
  snapshot: CurrentGatewaySnapshot,
  options: ServerLogOptions,
  log: () => FastifyBaseLogger,
): FastifyHttpOptions<Server> {
  const docsUrl = config.errors.docsUrl;
  return {
    logger:
      options.logger === false
        ? false
        : {
            level: config.logging.level,
            // Every line, whoever writes it, passes here last: no key or root key reaches the log.
            hooks: { streamWrite: redactionFollowing(snapshot) },
            // process.stdout writes synchronously to files, pipes and terminals (Linux): lines keep their order with
            // what goes to stderr (the bootstrap root key's banner comes after them) and none is lost at exit.
            stream: options.logStream ?? process.stdout,
          },
    // The access log (logging.requests) replaces Fastify's own two lines per request: see requestTelemetry.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: "requestId" }),
    // Requests refused before routing are answered in the envelope too (docs/errors.md).
    clientErrorHandler: clientErrorHandler({ docsUrl, log, logRequests: config.logging.requests !== false }),
    frameworkErrors: (error, request, reply) =>
      answerFrameworkError(error, request, reply, { docsUrl, logRequests: config.logging.requests !== false }),
    bodyLimit: config.server.bodyLimit,
    // Node's requestTimeout stays off (Fastify's default): it would cut the gateway's streaming uploads. /v2 has a
    // body deadline of its own (src/http/slow-requests.ts).
    http: {
      headersTimeout: config.server.headersTimeoutMs,
      requestTimeout: 0,
      connectionsCheckingInterval: connectionsCheckingInterval(config.server.headersTimeoutMs),
      ...NODE_CHECKS_LEFT_TO_KEYGATE,
    },
    genReqId: () => newId("req"),
    requestIdHeader: false,
    // Requests arriving while keygate closes get a 503 in the envelope instead (refuseAtTheDoor).
    return503OnClosing: false,
    ajv: {
      // Validate strictly, never coerce or drop (docs/decisions.md#validation). Defaults of optional fields are filled in.
      customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: true, allErrors: true, allowUnionTypes: true },
    },
  };
}

/**
 * Fastify's server with the gateway's request listener ahead of Fastify's own: a request the gateway takes never
 * reaches Fastify's routing. The server is made as Fastify would make it (its options, timeouts).
 */
export function gatewayFirst(gatewayTook: (request: IncomingMessage, response: ServerResponse) => boolean): FastifyServerFactory {
  return (handler, fastifyOptions) => {
    // Fastify has filled in its defaults by now.
    const options = fastifyOptions as { http?: ServerOptions; keepAliveTimeout: number; requestTimeout: number; connectionTimeout: number };
    const server = createServer(options.http ?? {}, (request, response) => {
      if (!gatewayTook(request, response)) handler(request, response);
    });
    server.keepAliveTimeout = options.keepAliveTimeout;
    server.requestTimeout = options.requestTimeout;
    server.setTimeout(options.connectionTimeout);
    return server;
  };
}

/**
 * Log redaction that knows the key locations of every route table `routes` has held: a reload adds the new
 * routes' locations before the next line is written.
 */
function redactionFollowing(snapshot: CurrentGatewaySnapshot): (line: string) => string {
  const redaction = new LogRedaction();
  let learntFrom: RouteTable | undefined;
  return (line) => {
    const table = snapshot.current.table;
    if (table !== learntFrom) {
      redaction.learn(table.routes.flatMap((route) => route.keySources));
      learntFrom = table;
    }
    return redaction.redact(line);
  };
}
