import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";

/** Per connection: the callbacks of the answers on it that have not closed yet. */
const openAnswers = new WeakMap<Socket, Set<(queued: boolean) => void>>();

/**
 * Calls `closed` once: when `response` closes (its answer was sent, or its client went away), or with `queued` true
 * when its connection closes first, since Node never closes a response queued behind another on a pipelined
 * connection that goes away. One listener per connection, however many answers it carries.
 */
export function whenAnswerCloses(request: IncomingMessage, response: ServerResponse, closed: (queued: boolean) => void): void {
  const socket = request.socket;
  let open = openAnswers.get(socket);
  if (open === undefined) {
    const answers = new Set<(queued: boolean) => void>();
    openAnswers.set(socket, answers);
    socket.once("close", () => {
      for (const settle of answers) settle(true);
    });
    open = answers;
  }
  const answers = open;
  const settle = (queued: boolean) => {
    if (answers.delete(settle)) closed(queued);
  };
  answers.add(settle);
  response.once("close", () => settle(false));
}
