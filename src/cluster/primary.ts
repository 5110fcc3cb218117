import { availableParallelism } from "node:os";
import pino from "pino";
import { openAnalytics } from "../analytics/index.js";
import type { KeygateConfig } from "../config/schema.js";
import { primaryRegistry } from "../http/metrics.js";
import { systemClock } from "../lib/clock.js";
import { defined } from "../lib/defined.js";
import { closeGracefully, logUnhandledRejections } from "../shutdown.js";
import { WorkerPool } from "./worker-pool.js";

/** How many processes serve requests: server.workers, "auto" being one per core (one on in-memory stores). */
export function workerCount(config: KeygateConfig): number {
  const { workers } = config.server;
  if (workers !== "auto") return workers;
  return config.storage.redis === undefined ? 1 : availableParallelism();
}

/**
 * The primary process of a keygate with several workers. It serves no request itself: it runs the worker pool,
 * relays SIGHUP (route reload) and SIGINT/SIGTERM (graceful shutdown, shutdown.ts) to every worker, owns the embedded analytics
 * engine (chDB runs in one process: the workers hand it their events and run their analytics statements in it),
 * and answers a worker's GET /metrics with every worker's series added up.
 */
export async function runPrimary(config: KeygateConfig, count: number): Promise<void> {
  const log = pino({ level: config.logging.level, base: { pid: process.pid, role: "primary" } });
  const analytics =
    config.analytics.engine === "embedded"
      ? await openAnalytics(config.analytics, { clock: systemClock, log: { warn: (message) => log.warn(message) } })
      : undefined;
  const own = primaryRegistry(analytics && (() => ({ ...analytics.stats(), recorded: 0 })));
  const pool = new WorkerPool({ log, analytics, ownMetrics: own.registry });
  const address = await pool.start(count);
  // Written whatever logging.level says (unless silent), as a single process writes its start-up lines.
  const startup = log.child({}, { level: config.logging.level === "silent" ? "silent" : "info" });
  startup.info({ address, workers: count }, `keygate is listening on ${address} with ${count} workers`);

  process.on("SIGHUP", () => pool.signalAll("SIGHUP"));
  logUnhandledRejections(log, own.unhandledRejection);
  // Each worker finishes its requests within server.shutdownTimeoutMs; then the primary writes the events they handed
  // it, within as long again. A second signal is passed on (each worker exits at once, saying what it cut); at the
  // deadline, workers still there are killed.
  const timeoutMs = 2 * config.server.shutdownTimeoutMs;
  closeGracefully({
    timeoutMs,
    log,
    pending: () => ({ workers: pool.size, ...defined({ analyticsEventsBuffered: analytics?.stats().buffered }) }),
    cutShort: (signal) => pool.signalAll(signal === "SIGINT" || signal === "SIGTERM" ? signal : "SIGKILL"),
    close: async (why) => {
      await pool.stop(why === "SIGINT" ? "SIGINT" : "SIGTERM");
      await analytics?.close();
      log.info({ signal: why }, "closed: every worker stopped, buffered analytics events written");
    },
  });
}
