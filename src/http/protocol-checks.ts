import type { IncomingMessage } from "node:http";
import type { FastifyInstance } from "fastify";
import { KeygateError } from "../errors/keygate-error.js";

/** Fastify options that hand to keygate the requests Node's HTTP server would otherwise refuse by itself. */
export const NODE_CHECKS_LEFT_TO_KEYGATE = { requireHostHeader: false } as const;

/**
 * Requests Node's HTTP server answers by itself with a bare status line (no envelope, no x-request-id), refused
 * here in the envelope instead, before anything else runs (the gateway checks its requests with unservableRequest): an HTTP/1.1 request without Host (400, as RFC 9112
 * requires) and an Expect other than 100-continue (417). Needs NODE_CHECKS_LEFT_TO_KEYGATE in the server options.
 */
export function refuseUnservableRequests(app: FastifyInstance): void {
  // With a listener, Node hands a request with an unknown expectation over instead of answering 417 itself.
  app.server.on("checkExpectation", (request, response) => app.server.emit("request", request, response));
  app.addHook("onRequest", (request, _reply, done) => done(unservableRequest(request.raw)));
}

/** Why Node would refuse `request` by itself (see refuseUnservableRequests), or undefined when it can be served. */
export function unservableRequest(request: IncomingMessage): KeygateError | undefined {
  if (request.httpVersion === "1.1" && !request.headers.host) {
    return new KeygateError("err:user:bad_request:missing_required_header", "An HTTP/1.1 request needs a Host header.");
  }
  const expect = request.headers.expect;
  if (expect !== undefined && expect.trim().toLowerCase() !== "100-continue") {
    return new KeygateError(
      "err:user:bad_request:expectation_failed",
      `The expectation '${expect}' cannot be met; only 'Expect: 100-continue' is understood.`,
    );
  }
  return undefined;
}
