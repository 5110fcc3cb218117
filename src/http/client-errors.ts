import type { Socket } from "node:net";
import type { FastifyBaseLogger } from "fastify";
import { KeygateError } from "../errors/keygate-error.js";
import { newId } from "../lib/ids.js";
import { answerOnSocket } from "./error-envelope.js";

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
