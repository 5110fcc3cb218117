import cluster, { type Worker } from "node:cluster";
import type pino from "pino";
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue, type Registry } from "prom-client";
import type { AnalyticsRuntime } from "../analytics/index.js";
import { Channel, isKeygateMessage, type Message } from "./channel.js";
import { recordHandedOver } from "./remote-analytics.js";
import { answerWorker, RemoteConnections } from "./worker-questions.js";

/** Environment of a worker: "1" for the one worker that may create the bootstrap root key and prints the summary. */
export const FIRST_WORKER_VARIABLE = "KEYGATE_FIRST_WORKER";

/** A worker that dies sooner than this after it started, or closes gracefully, is replaced after REPLACE_DELAY_MS. */
const QUICK_DEATH_MS = 5_000;
const REPLACE_DELAY_MS = 1_000;

type Metrics = MetricObjectWithValues<MetricValue<string>>[];

export interface WorkerPoolOptions {
  log: pino.Logger;
  /** The embedded analytics engine the workers hand their events and statements to; none when they keep their own. */
  analytics: AnalyticsRuntime | undefined;
  /** The primary's own series (its analytics engine's), added to the workers'. */
  ownMetrics: Registry | undefined;
}

/**
 * The worker processes of a keygate primary: forked (the first alone, so that only it may create the bootstrap
 * root key), each linked to the primary by a channel, replaced when one dies, signalled all at once.
 */
export class WorkerPool {
  private readonly options: WorkerPoolOptions;
  private readonly channels = new Map<Worker, Channel>();
  private readonly startedAt = new Map<Worker, number>();
  private stopping = false;

  constructor(options: WorkerPoolOptions) {
    this.options = options;
  }

  /** Starts `count` workers and resolves with the address they listen on; exits the process if one cannot start. */
  async start(count: number): Promise<string> {
    cluster.setupPrimary({ serialization: "advanced" });
    const address = await listeningOrExit(this.fork(true), this.options.log);
    const rest = Array.from({ length: count - 1 }, () => this.fork(false));
    await Promise.all(rest.map((worker) => listeningOrExit(worker, this.options.log)));
    return address;
  }

  /** Workers running now. */
  get size(): number {
    return this.channels.size;
  }

  /** Sends `signal` to every worker. */
  signalAll(signal: NodeJS.Signals): void {
    for (const worker of this.channels.keys()) worker.process.kill(signal);
  }

  /**
   * Asks every worker to close gracefully, replaces none from now on, and resolves once every one has exited. Asked by
   * message, not by signal: a worker that got the signal itself too (the whole process group does, from systemd or a
   * terminal's Ctrl-C) would take a second signal for "exit at once".
   */
  async stop(signal: NodeJS.Signals): Promise<void> {
    this.stopping = true;
    const exits = [...this.channels.keys()].map((worker) => new Promise((resolve) => worker.once("exit", resolve)));
    for (const worker of this.channels.keys()) {
      // One whose link is gone already closes on its own (its 'disconnect').
      if (worker.isConnected()) worker.send({ keygate: "close", signal } satisfies Message);
    }
    await Promise.all(exits);
  }

  /** Every worker's series, and the primary's own, added up (a worker's GET /metrics). */
  private async metricsOfAll(): Promise<string> {
    const perWorker = await Promise.all(
      [...this.channels.values()].map((channel) => channel.ask<Metrics>({ kind: "metrics-json" }).catch(() => [] as Metrics)),
    );
    const own = this.options.ownMetrics ? [(await this.options.ownMetrics.getMetricsAsJSON()) as Metrics] : [];
    return AggregatorRegistry.aggregate([...perWorker, ...own]).metrics();
  }

  private fork(first: boolean): Worker {
    const { analytics } = this.options;
    const worker = cluster.fork({ [FIRST_WORKER_VARIABLE]: first ? "1" : "0" });
    const connections = analytics ? new RemoteConnections(analytics) : undefined;
    const channel = new Channel(
      (message) => worker.send(message),
      (question) => answerWorker(question, connections, analytics, () => this.metricsOfAll()),
    );
    this.channels.set(worker, channel);
    this.startedAt.set(worker, Date.now());
    worker.on("message", (message: unknown) => {
      if (!isKeygateMessage(message)) return;
      if (message.keygate === "events") {
        if (analytics) recordHandedOver(analytics, message);
        return;
      }
      channel.receive(message);
    });
    worker.once("exit", (code, signal) => {
      this.channels.delete(worker);
      channel.failAll(new Error("the worker is gone"));
      connections?.releaseAll();
      if (!this.stopping) this.replace(worker, code, signal);
    });
    return worker;
  }

  private replace(worker: Worker, code: number | null, signal: string | null): void {
    const { log } = this.options;
    const lived = Date.now() - (this.startedAt.get(worker) ?? 0);
    this.startedAt.delete(worker);
    const details = { worker: worker.id, workerPid: worker.process.pid, code, signal };
    // A worker that closed gracefully was sent a signal: when the whole process group was (Ctrl-C, systemd), the
    // primary's own comes in a moment and stops the replacement.
    const graceful = code === 0;
    if (graceful) log.warn(details, "a worker stopped");
    else log.error(details, "a worker died");
    const delay = graceful || lived < QUICK_DEATH_MS ? REPLACE_DELAY_MS : 0;
    setTimeout(() => {
      if (this.stopping) return;
      const replacement = this.fork(false);
      log.info({ worker: replacement.id, replaces: worker.id }, "started a replacement worker");
    }, delay);
  }
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
