import cluster, { type Worker } from "node:cluster";
import { availableParallelism } from "node:os";
import pino from "pino";
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from "prom-client";
import { type AnalyticsRuntime, openAnalytics } from "../analytics/index.js";
import type { KeygateConfig } from "../config/schema.js";
import type { AnalyticsConnection } from "../domain/analytics/query-engine.js";
import { analyticsRegistry } from "../http/metrics.js";
import { systemClock } from "../lib/clock.js";
import { Channel, isKeygateMessage, type Question } from "./channel.js";
import { recordHandedOver } from "./remote-analytics.js";

/** Environment of a worker: "1" for the one worker that may create the bootstrap root key and prints the summary. */
export const FIRST_WORKER_VARIABLE = "KEYGATE_FIRST_WORKER";

/** A worker that dies sooner than this after it started, or closes gracefully, is replaced after REPLACE_DELAY_MS. */
const QUICK_DEATH_MS = 5_000;
const REPLACE_DELAY_MS = 1_000;

/** How many processes serve requests: server.workers, "auto" being one per core (one on in-memory stores). */
export function workerCount(config: KeygateConfig): number {
  const { workers } = config.server;
  if (workers !== "auto") return workers;
  return config.storage.redis === undefined ? 1 : availableParallelism();
}

type Metrics = MetricObjectWithValues<MetricValue<string>>[];

/**
 * The primary process of a keygate with several workers. It serves no request itself: it forks the workers (the
 * first alone, so that only it may create the bootstrap root key), replaces one that dies, relays SIGHUP (route
 * reload) and SIGINT/SIGTERM (graceful shutdown) to every worker, owns the embedded analytics engine (chDB runs in
 * one process: the workers hand it their events and run their analytics statements in it), and answers a
 * worker's GET /metrics with every worker's series added up.
 */
export async function runPrimary(config: KeygateConfig, count: number): Promise<void> {
  const log = pino({ level: config.logging.level, base: { pid: process.pid, role: "primary" } });
  const analytics =
    config.analytics.engine === "embedded"
      ? await openAnalytics(config.analytics, { clock: systemClock, log: { warn: (message) => log.warn(message) } })
      : undefined;
  const analyticsSeries = analytics && analyticsRegistry(() => ({ ...analytics.stats(), recorded: 0 }));
  const channels = new Map<Worker, Channel>();
  const startedAt = new Map<Worker, number>();
  let stopping = false;

  const metricsOfAll = async (): Promise<string> => {
    const perWorker = await Promise.all(
      [...channels.values()].map((channel) => channel.ask<Metrics>({ kind: "metrics-json" }).catch(() => [] as Metrics)),
    );
    const own = analyticsSeries ? [(await analyticsSeries.getMetricsAsJSON()) as Metrics] : [];
    return AggregatorRegistry.aggregate([...perWorker, ...own]).metrics();
  };

  const fork = (first: boolean): Worker => {
    const worker = cluster.fork({ [FIRST_WORKER_VARIABLE]: first ? "1" : "0" });
    const connections = analytics ? new RemoteConnections(analytics) : undefined;
    const channel = new Channel(
      (message) => worker.send(message),
      (question) => answer(question, connections, analytics, metricsOfAll),
    );
    channels.set(worker, channel);
    startedAt.set(worker, Date.now());
    worker.on("message", (message: unknown) => {
      if (!isKeygateMessage(message)) return;
      if (message.keygate === "events") {
        if (analytics) recordHandedOver(analytics.sinks, message);
        return;
      }
      channel.receive(message);
    });
    worker.once("exit", (code, signal) => {
      channels.delete(worker);
      channel.failAll(new Error("the worker is gone"));
      connections?.releaseAll();
      if (stopping) return;
      const lived = Date.now() - (startedAt.get(worker) ?? 0);
      startedAt.delete(worker);
      const details = { worker: worker.id, workerPid: worker.process.pid, code, signal };
      // A worker that closed gracefully was sent a signal: when the whole process group was (Ctrl-C, systemd), the
      // primary's own comes in a moment and stops the replacement.
      const graceful = code === 0;
      if (graceful) log.warn(details, "a worker stopped");
      else log.error(details, "a worker died");
      const delay = graceful || lived < QUICK_DEATH_MS ? REPLACE_DELAY_MS : 0;
      setTimeout(() => {
        if (stopping) return;
        const replacement = fork(false);
        log.info({ worker: replacement.id, replaces: worker.id }, "started a replacement worker");
      }, delay);
    });
    return worker;
  };

  cluster.setupPrimary({ serialization: "advanced" });
  const first = fork(true);
  const address = await listeningOrExit(first, log);
  const rest = Array.from({ length: count - 1 }, () => fork(false));
  await Promise.all(rest.map((worker) => listeningOrExit(worker, log)));
  log.info({ address, workers: count }, `keygate is listening on ${address} with ${count} workers`);

  process.on("SIGHUP", () => {
    for (const worker of channels.keys()) worker.process.kill("SIGHUP");
  });
  const shutdown = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "closing: every worker finishes its requests in flight");
    const exits = [...channels.keys()].map((worker) => new Promise((resolve) => worker.once("exit", resolve)));
    for (const worker of channels.keys()) worker.process.kill(signal);
    Promise.all(exits)
      .then(() => analytics?.close())
      .then(
        () => {
          log.info({ signal }, "closed: every worker stopped, buffered analytics events written");
          process.exit(0);
        },
        (error: unknown) => {
          log.error({ err: error }, "error while closing");
          process.exit(1);
        },
      );
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
}

/**
 * Resolves with the address a new worker listens on once it says it is ready (its start-up lines written); exits
 * the primary when the worker dies before that.
 */
function listeningOrExit(worker: Worker, log: pino.Logger): Promise<string> {
  return new Promise((resolve) => {
    const onExit = (code: number | null) => {
      log.error({ worker: worker.id, code }, "a worker stopped before it listened: keygate cannot start");
      process.exit(1);
    };
    const onMessage = (message: unknown) => {
      if (!isKeygateMessage(message) || message.keygate !== "ready") return;
      worker.off("exit", onExit);
      worker.off("message", onMessage);
      resolve(message.address);
    };
    worker.once("exit", onExit);
    worker.on("message", onMessage);
  });
}

function answer(
  question: Question,
  connections: RemoteConnections | undefined,
  analytics: AnalyticsRuntime | undefined,
  metricsOfAll: () => Promise<string>,
): Promise<unknown> {
  switch (question.kind) {
    case "metrics":
      return metricsOfAll();
    case "analytics-check":
      return analytics ? analytics.check() : Promise.resolve();
    case "analytics-flush":
      return analytics ? analytics.flush() : Promise.resolve();
    case "sql":
    case "release":
      if (!connections) return Promise.reject(new Error("analytics are not kept in the primary"));
      return question.kind === "release" ? connections.release(question.connection) : connections.run(question);
    case "metrics-json":
      return Promise.reject(new Error("the primary has no series of its own to give"));
  }
}

/**
 * A worker's analytics connections, opened in the primary's engine on their first statement and released when the
 * worker says so (or dies), so the statements of one analytics request share one connection, as on a local engine.
 */
class RemoteConnections {
  private readonly analytics: AnalyticsRuntime;
  private readonly open = new Map<number, Promise<{ connection: AnalyticsConnection; release: () => void }>>();

  constructor(analytics: AnalyticsRuntime) {
    this.analytics = analytics;
  }

  async run(statement: Extract<Question, { kind: "sql" }>): Promise<unknown> {
    const { connection } = await this.opened(statement.connection);
    return statement.rows ? connection.rows(statement.sql, statement.params) : connection.text(statement.sql, statement.params);
  }

  async release(id: number): Promise<void> {
    const opened = this.open.get(id);
    this.open.delete(id);
    if (opened) (await opened).release();
  }

  releaseAll(): void {
    for (const id of [...this.open.keys()]) void this.release(id).catch(() => {});
  }

  private opened(id: number): Promise<{ connection: AnalyticsConnection; release: () => void }> {
    let opened = this.open.get(id);
    if (!opened) {
      const engine = this.analytics.engine;
      if (!engine) return Promise.reject(new Error("analytics are off"));
      opened = new Promise((resolve, reject) => {
        engine
          .withConnection(
            (connection) =>
              new Promise<void>((release) => {
                resolve({ connection, release });
              }),
          )
          .catch(reject);
      });
      this.open.set(id, opened);
    }
    return opened;
  }
}
