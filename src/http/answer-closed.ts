import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";

/** Per connection: the callbacks of the answers on it that have not closed yet. */
const openAnswers = new WeakMap<Socket, Set<() => void>>();

/**
 * Calls `closed` once, when `response` closes (its answer was sent, or its client went away), or when its connection
 * closes first: Node never closes a response queued behind another on a pipelined connection that goes away. One
 * listener per connection, however many answers it carries.
 */
export function whenAnswerCloses(request: IncomingMessage, response: ServerResponse, closed: () => void): void {
  const socket = request.socket;
  let open = openAnswers.get(socket);
  if (open === undefined) {
    const answers = new Set<() => void>();
    openAnswers.set(socket, answers);
    socket.once("close", () => {
      for (const settle of answers) settle();
    });
    open = answers;
  }
  const answers = open;
  const settle = () => {
    if (answers.delete(settle)) closed();
  };
  answers.add(settle);
  response.once("close", settle);
}
