import type { FastifyInstance } from "fastify";
import { KeygateError } from "../errors/keygate-error.js";
import { closeAfterAnswer, isHttp2 } from "./http2.js";

/**
 * Limits on slow clients. Node's server-wide `requestTimeout` cannot be used: it would also cut the gateway's
 * streaming uploads, which may last as long as their upstream allows. So each face gets its own rule: the /v2 API
 * a deadline for its body (bodyDeadline), the gateway none of its own, and every answer given before its request
 * has fully arrived closes the connection (closeWhenAnsweredEarly). Headers have Node's `headersTimeout`.
 */

/** How often Node checks its connections against `headersTimeout`: a tenth of it, between 10 ms and 1 s. */
export function connectionsCheckingInterval(headersTimeoutMs: number): number {
  return Math.min(1_000, Math.max(10, Math.floor(headersTimeoutMs / 10)));
}

/**
 * A request's body must have arrived within `timeoutMs` of the moment keygate starts reading it (right after the
 * request's headers and its authentication); otherwise it is answered 408 `request_timeout` in the envelope and the
 * connection is closed (closeWhenAnsweredEarly). For the routes of the plugin `app` is (the /v2 API). Requests
 * whose body is already whole, and injected ones (no socket), are not watched. One timer per request and no
 * stream around the body: a wrapper stream would cost every /v2 call far more than the timer does.
 */
export function bodyDeadline(app: FastifyInstance, timeoutMs: number): void {
  app.addHook("preParsing", (request, reply, payload, done) => {
    if (request.raw.complete !== false) return done(null, payload);
    const timer = setTimeout(() => {
      if (reply.sent || request.raw.complete) return;
      // Fastify's body reader listens for 'error' on the stream it reads and answers with that error, as it does
      // for an aborted body: that fails the read without destroying the socket, which would leave no way to
      // answer. Without a reader there is nothing to answer through: the connection is closed.
      if (payload.listenerCount("error") > 0)
        payload.emit(
          "error",
          new KeygateError("err:user:bad_request:request_timeout", `The request body did not arrive within ${timeoutMs} ms.`),
        );
      else request.raw.destroy();
    }, timeoutMs);
    reply.raw.once("close", () => clearTimeout(timer));
    done(null, payload);
  });
}

/**
 * Every answer sent while its request's body is still arriving (a refusal, a body too large, a deadline passed)
 * closes the connection once sent (on HTTP/2, the request's stream: closeAfterAnswer). Otherwise Node would go on
 * reading and discarding the rest of the body, at the client's pace and with no deadline, before the connection
 * could serve another request. An HTTP/2 answer has no Connection header (the 503 of a closing keygate has one on
 * HTTP/1.1). For every route: call on the root instance.
 */
export function closeWhenAnsweredEarly(app: FastifyInstance): void {
  app.addHook("onSend", (request, reply, payload, done) => {
    const raw = request.raw;
    if (isHttp2(raw)) reply.removeHeader("connection");
    if (raw.complete === false && closeAfterAnswer(raw)) reply.header("connection", "close");
    done(null, payload);
  });
}
