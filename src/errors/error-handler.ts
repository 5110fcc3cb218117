import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { toValidationIssues } from "../http/validation-issues.js";
import { ERROR_CATALOGUE, errorTypeUrl, type ErrorCode } from "./catalogue.js";
import { invalidInput, KeygateError, isKeygateError } from "./keygate-error.js";

export interface ErrorHandlingOptions {
  docsUrl: string;
  bodyLimit: number;
}

const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;

/**
 * Every failure leaves keygate in the error envelope of spec §7: thrown KeygateErrors, Fastify's own errors
 * (validation, body too large, bad JSON, wrong media type), unknown paths (404) and wrong methods (405).
 * Anything unexpected is a 500 whose detail says nothing about the cause; the cause is logged with the request id.
 */
export const errorHandling = fp<ErrorHandlingOptions>(
  async (app, options) => {
    app.setErrorHandler((error: FastifyError, request, reply) => {
      const known = toKeygateError(error, options.bodyLimit);
      if (!known) {
        request.log.error({ err: error }, "unexpected error");
        return sendError(reply, request, options.docsUrl, new KeygateError("err:unkey:application:unexpected_error", "Something went wrong inside keygate. Quote the request id when you report it."));
      }
      return sendError(reply, request, options.docsUrl, known);
    });

    app.setNotFoundHandler((request, reply) => answerUnmatched(app, request, reply, options.docsUrl));
  },
  { name: "keygate-error-handling" },
);

/** URLs of the gateway's catch-all routes: they take every path, so they never make a path "served". */
const CATCH_ALL_URLS = new Set(["/", "/*"]);

/**
 * Characters of route patterns: hasRoute reads its argument as a pattern (and throws on a "*" that is not last),
 * while keygate's own routes are plain paths without them. A path holding one is no route's.
 */
const PATTERN_CHARACTERS = /[*:]/;

/** A request no route takes: 405 with Allow when the path is served for other methods, 404 otherwise. */
export function answerUnmatched(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, docsUrl: string): FastifyReply {
  const path = request.url.split("?")[0] as string;
  const routable = !CATCH_ALL_URLS.has(path) && !PATTERN_CHARACTERS.test(path);
  const allowed = routable ? HTTP_METHODS.filter((method) => app.hasRoute({ method, url: path })) : [];
  if (allowed.length > 0) {
    return sendError(
      reply,
      request,
      docsUrl,
      new KeygateError("err:user:bad_request:method_not_allowed", `${request.method} is not allowed on ${path}; use ${allowed.join(" or ")}.`, {
        headers: { allow: allowed.join(", ") },
      }),
    );
  }
  return sendError(reply, request, docsUrl, new KeygateError("err:user:bad_request:route_not_found", `No operation is served at ${request.method} ${path}.`));
}

/**
 * Sends `error` in the envelope. 429s are application/problem+json (the SDK requires it), and so is every error
 * of a route configured with `problemJsonErrors`; the rest are JSON.
 */
export function sendError(reply: FastifyReply, request: FastifyRequest, docsUrl: string, error: KeygateError): FastifyReply {
  const entry = ERROR_CATALOGUE[error.code];
  const problemJson = entry.status === 429 || request.routeOptions.config?.problemJsonErrors === true;
  if (error.headers) reply.headers(error.headers);
  return reply
    .code(entry.status)
    .type(problemJson ? "application/problem+json; charset=utf-8" : "application/json; charset=utf-8")
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
    FST_ERR_CTP_BODY_TOO_LARGE: ["err:user:bad_request:request_body_too_large", `The request body is larger than the limit of ${bodyLimit} bytes.`],
    FST_ERR_CTP_INVALID_MEDIA_TYPE: ["err:user:bad_request:unsupported_media_type", "Send the request body as JSON with 'Content-Type: application/json'."],
    FST_ERR_CTP_EMPTY_JSON_BODY: ["err:user:bad_request:request_body_unreadable", "The request body is empty; send a JSON object."],
    FST_ERR_CTP_INVALID_JSON_BODY: ["err:user:bad_request:request_body_unreadable", "The request body is not valid JSON."],
    FST_ERR_CTP_INVALID_CONTENT_LENGTH: ["err:user:bad_request:request_body_unreadable", "The Content-Length header does not match the body."],
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
