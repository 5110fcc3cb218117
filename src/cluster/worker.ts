import type { FastifyInstance } from "fastify";
import type { BuildOptions } from "../app.js";
import type { KeygateConfig } from "../config/schema.js";
import { defined } from "../lib/defined.js";
import { Channel, isKeygateMessage, type Message } from "./channel.js";
import { remoteAnalytics } from "./remote-analytics.js";

/**
 * A worker's link to its primary: the primary keeps the embedded analytics engine (a worker gets a runtime that
 * hands events and statements to it) and adds up every worker's metrics for GET /metrics; the worker answers the
 * primary's requests for its own series once its app is built (`serve`).
 */
export function linkToPrimary(config: KeygateConfig): {
  options: BuildOptions;
  serve(app: FastifyInstance): void;
  ready(address: string): void;
  close(): Promise<void>;
  /** Calls `listener` when the primary asks this worker to close gracefully. */
  onCloseRequest(listener: () => void): void;
} {
  let app: FastifyInstance | undefined;
  let closeRequested = () => {};
  const send = (message: Message, done?: () => void) => process.send?.(message, undefined, undefined, () => done?.());
  const channel = new Channel(send, async (question) => {
    if (question.kind !== "metrics-json") throw new Error(`a worker does not answer '${question.kind}'`);
    return (await app?.metrics?.json()) ?? [];
  });
  process.on("message", (message: unknown) => {
    if (!isKeygateMessage(message)) return;
    if (message.keygate === "close") closeRequested();
    else channel.receive(message);
  });
  process.on("disconnect", () => channel.failAll(new Error("the primary process is gone")));
  const analytics = config.analytics.engine === "embedded" ? remoteAnalytics(channel, send) : undefined;
  return {
    options: {
      ...defined({ analytics }),
      scrapeMetrics: () => channel.ask<string>({ kind: "metrics" }),
    },
    serve: (built) => {
      app = built;
    },
    // Sent after the worker's start-up lines are written, so that the primary's "keygate is listening" comes last.
    ready: (address) => send({ keygate: "ready", address }),
    // The app leaves an analytics runtime it was given open: the events not handed over yet go now.
    close: async () => analytics?.close(),
    onCloseRequest: (listener) => {
      closeRequested = listener;
    },
  };
}
