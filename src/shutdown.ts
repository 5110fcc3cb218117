import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import closeWithGrace from "close-with-grace";

// The process's net: how keygate (a server, or the primary of its workers) stops, and what it does with a rejection
// nothing handled. Process-wide handlers, so the server's entries install them; the Fastify plugin never does (the
// application it runs in owns its process).

export interface ProcessLog {
  info(details: object, message: string): void;
  error(details: object, message: string): void;
}

/**
 * Every promise rejection nothing handled is logged with its cause and counted (`count`), and the process serves on:
 * Node's default would end it, and with it every request in flight, for what is one failed task. Each is a bug (every
 * chain keygate starts has a handler); the log line and `keygate_unhandled_rejections_total` say so.
 */
export function logUnhandledRejections(log: ProcessLog, count: () => void): void {
  process.on("unhandledRejection", (reason) => {
    count();
    log.error({ err: reason }, "a promise was rejected and nothing handled it (a bug in keygate: please report it); serving on");
  });
}

/** Requests and upgraded connections a server has open now: what a shutdown cut short would cut. */
export function openWork(server: {
  on(event: "request", listener: (request: IncomingMessage, response: ServerResponse) => void): unknown;
  on(event: "upgrade", listener: (request: IncomingMessage, socket: Duplex) => void): unknown;
}): () => { requestsInFlight: number; upgradedConnections: number } {
  let requestsInFlight = 0;
  let upgradedConnections = 0;
  server.on("request", (_request, response) => {
    requestsInFlight++;
    response.once("close", () => requestsInFlight--);
  });
  server.on("upgrade", (_request, socket) => {
    upgradedConnections++;
    socket.once("close", () => upgradedConnections--);
  });
  return () => ({ requestsInFlight, upgradedConnections });
}

export interface GracefulShutdownOptions {
  /** server.shutdownTimeoutMs: past it the process exits, whatever is left. */
  timeoutMs: number;
  log: ProcessLog;
  /** Stops taking work, finishes what is in flight and writes what is buffered; `why`: the signal or cause. */
  close(why: string): Promise<void>;
  /** What would be lost if the process exited now, for the line that says so. */
  pending(): object;
  /** Told just before the process exits cut short: by a second `signal`, or (undefined) the deadline or an error. */
  cutShort?(signal: string | undefined): void;
}

/**
 * Closes gracefully on SIGTERM, SIGINT and the other signals close-with-grace handles, and on an uncaught exception
 * (logged, exit code 1); a second signal, or `timeoutMs` passing, exits at once with one line saying what was cut.
 * Left alone: SIGHUP (keygate reloads on it), rejections (logUnhandledRejections), and SIGILL, SIGBUS, SIGFPE and
 * SIGSEGV, after which Node says no JavaScript may safely run. Returns `close()`, for a shutdown not from a signal
 * (a worker asked by its primary, or whose primary is gone); it does nothing once closing.
 */
export function closeGracefully(options: GracefulShutdownOptions): { close(): void } {
  const { log, timeoutMs } = options;
  let closing = false;
  const cut = (what: string, signal?: string) => (details: object) => {
    log.error({ ...details, cut: options.pending() }, `${what}: exiting now`);
    options.cutShort?.(signal);
  };
  const grace = closeWithGrace(
    {
      delay: timeoutMs,
      logger: false,
      skip: ["SIGHUP", "unhandledRejection", "SIGILL", "SIGBUS", "SIGFPE", "SIGSEGV"],
      onSecondSignal: (signal) => cut(`a second ${signal} while closing`, signal)({ signal }),
      onTimeout: () => cut(`not closed within server.shutdownTimeoutMs (${timeoutMs} ms)`)({ timeoutMs }),
      onSecondError: (error) => cut("an uncaught exception while closing")({ err: error }),
    },
    async ({ signal, err }) => {
      closing = true;
      if (err) log.error({ err }, "an uncaught exception: closing (a bug in keygate: please report it)");
      const why = signal ?? (err ? "uncaught exception" : "request");
      log.info({ signal: why, timeoutMs }, `closing: finishing the requests in flight and writing what is buffered (${why})`);
      try {
        await options.close(why);
      } catch (error) {
        log.error({ err: error, cut: options.pending() }, "error while closing: exiting");
        throw error;
      }
    },
  );
  return {
    close: () => {
      if (!closing) grace.close();
    },
  };
}
