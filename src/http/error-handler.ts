import type { IncomingMessage } from "node:http";
import type { FastifyBaseLogger, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { ERROR_CATALOGUE, type ErrorCode } from "../errors/catalogue.js";
import { invalidInput, isKeygateError, KeygateError } from "../errors/keygate-error.js";
import { defined } from "../lib/defined.js";
import { errorBody, errorMediaType } from "./error-envelope.js";
import { splitTarget } from "./request-target.js";
import { toValidationIssues } from "./validation-issues.js";

export interface ErrorHandlingOptions {
  docsUrl: string;
  bodyLimit: number;
}

const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;

const UNEXPECTED_DETAIL = "Something went wrong inside keygate. Quote the request id when you report it.";

/**
 * Every failure leaves keygate in the error envelope (docs/errors.md): thrown KeygateErrors, Fastify's own errors
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
  },
  { name: "keygate-error-handling" },
);

/** The 500 of anything unexpected: its detail says nothing of the cause, which is logged with the request id. */
export function unexpectedError(): KeygateError {
  return new KeygateError("err:unkey:application:unexpected_error", UNEXPECTED_DETAIL);
}

/** The 503 of a request that arrives while keygate closes; its connection is closed once it is answered. */
export function shuttingDownError(): KeygateError {
  return new KeygateError(
    "err:keygate:server:shutting_down",
    "keygate is shutting down. Send the request again, to another instance if there is one.",
    { headers: { connection: "close" } },
  );
}

/** The 400 of a request whose target has a percent escape that does not decode. */
export function malformedUrlError(): KeygateError {
  return new KeygateError(
    "err:user:bad_request:malformed_url",
    "The request URL cannot be decoded: each '%' must start a percent-encoded UTF-8 character ('%' and two hexadecimal digits per byte).",
  );
}

/**
 * Characters of route patterns: hasRoute reads its argument as a pattern (and throws on a "*" that is not last),
 * while keygate's own routes are plain paths without them. A path holding one is no route's.
 */
const PATTERN_CHARACTERS = /[*:]/;

/** A request no route takes: 405 with Allow when the path is served for other methods, 404 otherwise. */
export function answerUnmatched(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, docsUrl: string): FastifyReply {
  const { path } = splitTarget(request.url);
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
  const details = { err: error, code: error.code, ...defined({ requestId }) };
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
    return sendError(reply, request, docsUrl, malformedUrlError());
  }
  request.log.error({ err: error }, "unexpected error");
  return sendError(reply, request, docsUrl, unexpectedError());
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
