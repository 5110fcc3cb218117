import { type IncomingMessage, STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { FastifyBaseLogger, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { ERROR_CATALOGUE, type ErrorCode, errorTypeUrl } from "../errors/catalogue.js";
import { invalidInput, isKeygateError, KeygateError } from "../errors/keygate-error.js";
import { newId } from "../lib/ids.js";
import { toValidationIssues } from "./validation-issues.js";

export interface ErrorHandlingOptions {
  docsUrl: string;
  bodyLimit: number;
}

const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;

const UNEXPECTED_DETAIL = "Something went wrong inside keygate. Quote the request id when you report it.";

/**
 * Every failure leaves keygate in the error envelope of spec §7: thrown KeygateErrors, Fastify's own errors
 * (validation, body too large, bad JSON, wrong media type), unknown paths (404) and wrong methods (405).
 * Anything unexpected is a 500 whose detail says nothing about the cause. Every 5xx logs its cause (the error and
 * its causes) with the request id: 503 at warn, the rest at error. A client that went away while its body was
 * being read gets 499 client_closed_request, logged at info: that is no fault of keygate.
 */
export const errorHandling = fp<ErrorHandlingOptions>(
  async (app, options) => {
    app.setErrorHandler((error: FastifyError, request, reply) => {
      if (clientWentAway(error, request)) return answerClientClosed(reply, request, options.docsUrl);
      const known = toKeygateError(error, options.bodyLimit);
      if (!known) {
        request.log.error({ err: error }, "unexpected error");
        return sendError(reply, request, options.docsUrl, unexpectedError());
      }
      logServerError(request.log, known);
      return sendError(reply, request, options.docsUrl, known);
    });

    app.setNotFoundHandler((request, reply) => answerUnmatched(app, request, reply, options.docsUrl));

    // A request that arrives while keygate closes (on a connection that was busy) is refused in the envelope;
    // this replaces Fastify's own 503 (return503OnClosing), which has neither.
    let closing = false;
    app.addHook("preClose", (done) => {
      closing = true;
      done();
    });
    app.addHook("onRequest", (request, reply, done) => {
      if (!closing) return done();
      const error = shuttingDownError();
      logServerError(request.log, error);
      reply.header("connection", "close");
      sendError(reply, request, options.docsUrl, error);
    });
  },
  { name: "keygate-error-handling" },
);

/** The 500 of anything unexpected: its detail says nothing of the cause, which is logged with the request id. */
export function unexpectedError(): KeygateError {
  return new KeygateError("err:unkey:application:unexpected_error", UNEXPECTED_DETAIL);
}

/** The 503 of a request that arrives while keygate closes. */
export function shuttingDownError(): KeygateError {
  return new KeygateError(
    "err:keygate:server:shutting_down",
    "keygate is shutting down. Send the request again, to another instance if there is one.",
  );
}

/**
 * Characters of route patterns: hasRoute reads its argument as a pattern (and throws on a "*" that is not last),
 * while keygate's own routes are plain paths without them. A path holding one is no route's.
 */
const PATTERN_CHARACTERS = /[*:]/;

/** A request no route takes: 405 with Allow when the path is served for other methods, 404 otherwise. */
export function answerUnmatched(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, docsUrl: string): FastifyReply {
  const path = request.url.split("?")[0] as string;
  const routable = !PATTERN_CHARACTERS.test(path);
  const allowed = routable ? HTTP_METHODS.filter((method) => app.hasRoute({ method, url: path })) : [];
  if (allowed.length > 0) {
    return sendError(
      reply,
      request,
      docsUrl,
      new KeygateError(
        "err:user:bad_request:method_not_allowed",
        `${request.method} is not allowed on ${path}; use ${allowed.join(" or ")}.`,
        {
          headers: { allow: allowed.join(", ") },
        },
      ),
    );
  }
  return sendError(
    reply,
    request,
    docsUrl,
    new KeygateError("err:user:bad_request:route_not_found", `No operation is served at ${request.method} ${path}.`),
  );
}

/**
 * Logs the cause of a 5xx answer (`error` and its causes, which stay out of the answer): 503 at warn, the rest at
 * error. The line carries the request id through `log`, or `requestId` when there is no request logger.
 */
export function logServerError(log: FastifyBaseLogger, error: KeygateError, requestId?: string): void {
  const status = ERROR_CATALOGUE[error.code].status;
  if (status < 500) return;
  const details = { err: error, code: error.code, ...(requestId !== undefined ? { requestId } : {}) };
  if (status === 503) log.warn(details, `answered ${status} ${error.code}`);
  else log.error(details, `answered ${status} ${error.code}`);
}

/** The body stream failed because the client aborted (Node's "aborted", ECONNRESET, and the connection is gone). */
function clientWentAway(error: FastifyError, request: FastifyRequest): boolean {
  return error.code === "ECONNRESET" && clientGone(request.raw);
}

/** Whether a request's client connection is gone (Node detaches a request from its socket once that has closed). */
export function clientGone(request: IncomingMessage): boolean {
  return request.socket === null || request.socket.destroyed;
}

/**
 * A request whose client closed the connection before it was read or answered: 499 client_closed_request (sent
 * to no one, for the request log) and a line at info without a stack, since it is no fault of keygate.
 */
export function answerClientClosed(reply: FastifyReply, request: FastifyRequest, docsUrl: string): FastifyReply {
  request.log.info(
    { code: "err:user:bad_request:client_closed_request" },
    "the client closed the connection before its request was read or answered",
  );
  return sendError(
    reply,
    request,
    docsUrl,
    new KeygateError("err:user:bad_request:client_closed_request", "The connection was closed before the request was read or answered."),
  );
}

/**
 * Fastify's `frameworkErrors`: errors raised while routing, before a route runs. A URL that cannot be decoded is
 * a 400 malformed_url; the others (a parameter too long, an async constraint) cannot happen with keygate's routes
 * and are unexpected. Answered in the envelope with the request id Fastify made.
 */
export function answerFrameworkError(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
  options: { docsUrl: string; logRequests: boolean },
): FastifyReply {
  const { docsUrl } = options;
  if (error.code === "FST_ERR_BAD_URL") {
    // Refused before routing: no access log line follows, so the refusal is the request's line.
    if (options.logRequests) request.log.info({ code: "err:user:bad_request:malformed_url" }, "refused a URL that cannot be decoded");
    return sendError(
      reply,
      request,
      docsUrl,
      new KeygateError(
        "err:user:bad_request:malformed_url",
        "The request URL cannot be decoded: each '%' must start a percent-encoded UTF-8 character ('%' and two hexadecimal digits per byte).",
      ),
    );
  }
  request.log.error({ err: error }, "unexpected error");
  return sendError(reply, request, docsUrl, unexpectedError());
}

/** How Node's HTTP parser errors are answered (by the `code` of the 'clientError' event's error). */
function clientErrorAnswer(code: string | undefined): KeygateError {
  if (code === "HPE_HEADER_OVERFLOW") {
    return new KeygateError(
      "err:user:bad_request:request_header_fields_too_large",
      "The request line and headers are too large; send fewer or shorter headers.",
    );
  }
  if (code === "ERR_HTTP_REQUEST_TIMEOUT")
    return new KeygateError("err:user:bad_request:request_timeout", "The request took too long to arrive.");
  return new KeygateError("err:user:bad_request:malformed_request", "The request is not valid HTTP/1.1 and cannot be read.");
}

export interface ClientErrorOptions {
  docsUrl: string;
  log: () => FastifyBaseLogger;
  /** `logging.requests`: refusals are then logged at info like every request; otherwise at debug. */
  logRequests: boolean;
}

/**
 * Fastify's `clientErrorHandler` (Node's 'clientError' event): a request Node cannot parse, whose headers are too
 * large, or that took too long to arrive, before there is a request object. It is answered in the envelope with a
 * request id made here, and the connection is closed. A connection the client already reset gets no answer.
 */
export function clientErrorHandler(options: ClientErrorOptions): (error: Error & { code?: string }, socket: Socket) => void {
  return (error, socket) => {
    // The client reset the connection, or closed it in the middle of a request (whose own handling, if it had
    // begun, answers it): there is no one to answer.
    if (error.code === "ECONNRESET" || error.code === "HPE_INVALID_EOF_STATE" || socket.destroyed) {
      socket.destroy();
      return;
    }
    // A response already under way on this connection (pipelining) cannot be followed by one of ours.
    const current = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (!socket.writable || current?.headersSent) {
      socket.destroy();
      return;
    }
    const requestId = newId("req");
    const answer = clientErrorAnswer(error.code);
    const log = options.log();
    const details = { requestId, code: answer.code, parserError: error.code };
    if (options.logRequests) log.info(details, "refused a request that cannot be read");
    else log.debug(details, "refused a request that cannot be read");
    answerOnSocket(socket, requestId, answer, options.docsUrl);
  };
}

/** An error answer written outside Fastify's reply (the gateway's listener, a raw socket): status, headers, body. */
export function errorAnswer(requestId: string, error: KeygateError, docsUrl: string): ErrorAnswer {
  const status = ERROR_CATALOGUE[error.code].status;
  const body = JSON.stringify(errorBody(requestId, error, docsUrl));
  const headers = {
    ...error.headers,
    "x-request-id": requestId,
    "content-type": errorMediaType(status),
    "content-length": String(Buffer.byteLength(body)),
  };
  return { status, headers, body };
}

export interface ErrorAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Writes `error` as a complete HTTP response on a raw socket (a request Node could not parse, an upgrade, neither
 * of which has a reply object) and closes the connection once it is written. Returns the answer as written;
 * undefined when the socket was already gone.
 */
export function answerOnSocket(socket: Duplex, requestId: string, error: KeygateError, docsUrl: string): ErrorAnswer | undefined {
  if (socket.destroyed) return undefined;
  const answer = errorAnswer(requestId, error, docsUrl);
  const { status, headers, body } = answer;
  headers.connection = "close";
  const lines = [`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}`];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  socket.end(`${lines.join("\r\n")}\r\n\r\n${body}`);
  return answer;
}

/** The media type of an error: problem+json for 429s (the SDK requires it) and where a route asks for it. */
function errorMediaType(status: number, problemJson = false): string {
  return problemJson || status === 429 ? "application/problem+json; charset=utf-8" : "application/json; charset=utf-8";
}

/**
 * Sends `error` in the envelope, with the request id as `x-request-id` (also for answers made before the
 * request's hooks ran). 429s are application/problem+json (the SDK requires it), and so is every error of a route
 * configured with `problemJsonErrors`; the rest are JSON.
 */
export function sendError(reply: FastifyReply, request: FastifyRequest, docsUrl: string, error: KeygateError): FastifyReply {
  const { status } = ERROR_CATALOGUE[error.code];
  if (error.headers) reply.headers(error.headers);
  reply.header("x-request-id", request.id);
  return reply
    .code(status)
    .type(errorMediaType(status, request.routeOptions.config?.problemJsonErrors === true))
    .send(errorBody(request.id, error, docsUrl));
}

export function errorBody(requestId: string, error: KeygateError, docsUrl: string): object {
  const entry = ERROR_CATALOGUE[error.code];
  return {
    meta: { requestId },
    error: {
      title: entry.title,
      detail: error.detail,
      status: entry.status,
      type: errorTypeUrl(error.code, docsUrl),
      // Every 400 carries errors[] (the SDK's typed 400 requires it), empty when no field is to blame.
      ...(error.errors ? { errors: error.errors } : entry.status === 400 ? { errors: [] } : {}),
    },
  };
}

/** Maps anything thrown to a catalogue error, or undefined when it is unexpected (a 500). */
function toKeygateError(error: FastifyError, bodyLimit: number): KeygateError | undefined {
  if (isKeygateError(error)) return error;
  if (error.validation) {
    const issues = toValidationIssues(error.validation as never, error.validationContext ?? "body");
    return invalidInput(issues);
  }
  const byCode: Partial<Record<string, [ErrorCode, string]>> = {
    FST_ERR_CTP_BODY_TOO_LARGE: [
      "err:user:bad_request:request_body_too_large",
      `The request body is larger than the limit of ${bodyLimit} bytes.`,
    ],
    FST_ERR_CTP_INVALID_MEDIA_TYPE: [
      "err:user:bad_request:unsupported_media_type",
      "Send the request body as JSON with 'Content-Type: application/json'.",
    ],
    FST_ERR_CTP_EMPTY_JSON_BODY: ["err:user:bad_request:request_body_unreadable", "The request body is empty; send a JSON object."],
    FST_ERR_CTP_INVALID_JSON_BODY: ["err:user:bad_request:request_body_unreadable", "The request body is not valid JSON."],
    FST_ERR_CTP_INVALID_CONTENT_LENGTH: [
      "err:user:bad_request:request_body_unreadable",
      "The Content-Length header does not match the body.",
    ],
    FST_ERR_CTP_INVALID_TYPE: ["err:user:bad_request:unsupported_media_type", "The Content-Type header is not valid."],
  };
  const mapped = error.code ? byCode[error.code] : undefined;
  if (mapped) return new KeygateError(mapped[0], mapped[1]);
  // JSON.parse failures reach us as SyntaxErrors marked 400 by Fastify's body parser.
  if (error instanceof SyntaxError && error.statusCode === 400) {
    return new KeygateError("err:user:bad_request:request_body_unreadable", "The request body is not valid JSON.");
  }
  if (error.statusCode === 408) return new KeygateError("err:user:bad_request:request_timeout", "The request took too long.");
  return undefined;
}

/** Root-level hook: every response carries its request id, errors and proxied answers included. */
export function addRequestIdHeader(app: FastifyInstance): void {
  app.addHook("onRequest", (request, reply, done) => {
    reply.header("x-request-id", request.id);
    done();
  });
}
