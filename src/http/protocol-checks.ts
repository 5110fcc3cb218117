import type { IncomingMessage } from "node:http";
import type { FastifyInstance } from "fastify";
import { KeygateError } from "../errors/keygate-error.js";
import { shuttingDownError } from "./error-handler.js";

/** Fastify options that hand to keygate the requests Node's HTTP server would otherwise refuse by itself. */
export const NODE_CHECKS_LEFT_TO_KEYGATE = { requireHostHeader: false } as const;

/**
 * Why a request is refused before anything else is done for it, at each of keygate's doors alike (/v2 through
 * Fastify, plain gateway requests, WebSocket upgrades); undefined when it can be served. While keygate closes,
 * every request is 503 with `Connection: close`. Otherwise, what Node's HTTP server would answer by itself with a
 * bare status line (no envelope, no x-request-id) is refused here in the envelope: an HTTP/1.1 request without Host
 * (400, as RFC 9112 requires) and an Expect other than 100-continue (417). Needs NODE_CHECKS_LEFT_TO_KEYGATE.
 */
export function refusalAtTheDoor(request: IncomingMessage, closing: boolean): KeygateError | undefined {
  if (closing) return shuttingDownError();
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

/**
 * The refusals of refusalAtTheDoor for the requests Fastify serves, before anything else runs for them; the error
 * handler answers them in the envelope (and logs the 503s). Replaces Fastify's own 503 while closing
 * (`return503OnClosing`), which has neither.
 */
export function refuseAtTheDoor(app: FastifyInstance): void {
  // With a listener, Node hands a request with an unknown expectation over instead of answering 417 itself.
  app.server.on("checkExpectation", (request, response) => app.server.emit("request", request, response));
  let closing = false;
  app.addHook("preClose", (done) => {
    closing = true;
    done();
  });
  app.addHook("onRequest", (request, _reply, done) => done(refusalAtTheDoor(request.raw, closing)));
}
