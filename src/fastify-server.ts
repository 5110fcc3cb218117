import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from "node:http";
import { createSecureServer, type Http2SecureServer, type ServerHttp2Session } from "node:http2";
import { type FastifyBaseLogger, type FastifyHttpOptions, type FastifyServerFactory, LogController } from "fastify";
import type { KeygateConfig } from "./config/schema.js";
import { secureContextOptions, type TlsCredentials } from "./config/tls-files.js";
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
    // With TLS, Fastify reads this only to write https:// in the address `listen` resolves to: gatewayFirst makes the
    // server, and Fastify tells an HTTP/2 request by its httpVersionMajor, whatever its `http2` option says.
    ...(config.server.tls ? ({ https: { allowHTTP1: true } } as object) : {}),
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
    // Fastify's own compilers, as Fastify runs them: every route's validators and serializers compiled at start-up,
    // so a schema that does not compile fails start-up, not a request (test/http/schemas-at-start.test.ts). Compiling
    // them on first use instead saved 5 to 15 MB of idle RSS (bench/idle-memory, one run each), too little to
    // turn a broken schema into a 500.
  };
}

/** Fastify's options as its server factory gets them, its defaults filled in. */
interface FactoryOptions {
  http?: ServerOptions;
  keepAliveTimeout: number;
  requestTimeout: number;
  connectionTimeout: number;
}

/**
 * Fastify's server with the gateway's request listener ahead of Fastify's own: a request the gateway takes never
 * reaches Fastify's routing. The server is made as Fastify would make it (its options, timeouts). With `tls`, it is
 * an HTTP/2 server over TLS that serves HTTP/1.1 too (tlsServer).
 */
export function gatewayFirst(
  gatewayTook: (request: IncomingMessage, response: ServerResponse) => boolean,
  tls?: TlsCredentials,
): FastifyServerFactory {
  return (handler, fastifyOptions) => {
    const options = fastifyOptions as unknown as FactoryOptions;
    const listener = (request: IncomingMessage, response: ServerResponse) => {
      if (!gatewayTook(request, response)) handler(request, response);
    };
    if (tls !== undefined) return tlsServer(tls, options, listener);
    const server = createServer(options.http ?? {}, listener);
    server.keepAliveTimeout = options.keepAliveTimeout;
    server.requestTimeout = options.requestTimeout;
    server.setTimeout(options.connectionTimeout);
    return server;
  };
}

/** What closes the HTTP/2 connections of each server tlsServer made. */
const sessionClosers = new WeakMap<object, () => void>();

/**
 * Closes the HTTP/2 connections of a server gatewayFirst made (a GOAWAY each, once its streams in flight are done),
 * and every one its handshake ends later; nothing for a server without TLS. Fastify ignores its own HTTP/2 options
 * with a serverFactory, so the app calls this from a preClose hook (buildApp).
 */
export function closeHttp2Sessions(server: object): void {
  sessionClosers.get(server)?.();
}

/**
 * HTTPS: HTTP/2 when the client offers it by ALPN, HTTP/1.1 otherwise (and for WebSocket upgrades, which are
 * HTTP/1.1 only), on one port. Its requests reach `listener` as Node's HTTP/2 compatibility objects
 * (Http2ServerRequest, Http2ServerResponse), which the gateway and Fastify serve as they serve HTTP/1.1 requests
 * (docs/gateway.md#http2-and-tls); the type says http.Server because the rest of keygate is written against Fastify's
 * default. The HTTP/1.1 connections take the same timeouts and checks as the plain server's (Node reads them from
 * the server's properties). A TLS handshake that fails gets no HTTP answer: its socket is closed.
 */
function tlsServer(tls: TlsCredentials, options: FactoryOptions, listener: (request: IncomingMessage, response: ServerResponse) => void) {
  const server = createSecureServer({ allowHTTP1: true, ...secureContextOptions(tls) }, listener as never) as Http2SecureServer &
    Pick<Server, "headersTimeout" | "requestTimeout" | "keepAliveTimeout"> & {
      connectionsCheckingInterval: number;
    };
  const http = options.http ?? {};
  server.headersTimeout = http.headersTimeout ?? server.headersTimeout;
  server.requestTimeout = options.requestTimeout;
  server.connectionsCheckingInterval = http.connectionsCheckingInterval ?? server.connectionsCheckingInterval;
  server.keepAliveTimeout = options.keepAliveTimeout;
  server.setTimeout(options.connectionTimeout);
  // Node would hand a failed handshake to 'clientError', whose handler answers in HTTP/1.1 on the socket.
  server.removeAllListeners("tlsClientError");
  server.on("tlsClientError", (_error, socket) => socket.destroy());
  // An idle HTTP/2 connection is closed after keepAliveTimeout, as an idle HTTP/1.1 one is. Node 20's server.close()
  // leaves HTTP/2 connections open: the app closes them when it starts closing (closeHttp2Sessions, in a preClose
  // hook), each with a GOAWAY once its streams in flight are done. One accepted after that is closed at once.
  const sessions = new Set<ServerHttp2Session>();
  let closing = false;
  server.on("session", (session) => {
    if (closing) return void session.close();
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    session.setTimeout(options.keepAliveTimeout, () => session.close());
  });
  sessionClosers.set(server, () => {
    closing = true;
    for (const session of sessions) session.close();
  });
  return server as unknown as Server;
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
      redaction.learn([...table.routes, ...table.decisionOnly].flatMap((route) => route.keySources));
      learntFrom = table;
    }
    return redaction.redact(line);
  };
}
