import type { EventSink } from "../domain/analytics/events.js";
import type { Clock } from "../lib/clock.js";
import type { EventBatch } from "./analytics-engine.js";

/** Where the pipeline's batches come from and go to (an engine's newBatch, insertBatch and releaseBatch). */
export interface BatchIO<B extends EventBatch<unknown>> {
  create(): B;
  write(batch: B): Promise<void>;
  /** Called once a batch is written or given up, never during a write. */
  release(batch: B): void;
}

export interface EventPipelineOptions {
  /** Events buffered at most (a batch waiting for a retry included); beyond it new events are dropped and counted. */
  maxEvents: number;
  /** A batch is written as soon as this many events wait, and a batch never holds more. */
  batchSize: number;
  /** Whatever waits is written at least this often; a failed batch is retried at this pace. */
  flushIntervalMs: number;
  /** A batch that failed this many times is dropped (and counted). */
  maxWriteAttempts: number;
  /** Keep an event even beyond maxEvents (the audit log, whose writers ask isFull() first and wait or fail). */
  keepWhenFull?: boolean;
}

export interface EventPipelineStats {
  /** Events handed to record(). */
  recorded: number;
  /** Events the engine accepted. */
  written: number;
  /** Events in memory now: waiting, being written, or waiting for a retry. Never more than maxEvents. */
  buffered: number;
  /**
   * Events dropped, by reason: the buffer was full, their batch kept failing (or the event could not be added to
   * one), they came after close(), or analytics is off.
   */
  dropped: { bufferFull: number; writeFailed: number; afterClose: number; disabled: number };
  batchesWritten: number;
  failedWrites: number;
}

/** The counters of several pipelines added up. */
export function addStats(stats: readonly EventPipelineStats[]): EventPipelineStats {
  const total: EventPipelineStats = {
    recorded: 0,
    written: 0,
    buffered: 0,
    dropped: { bufferFull: 0, writeFailed: 0, afterClose: 0, disabled: 0 },
    batchesWritten: 0,
    failedWrites: 0,
  };
  for (const each of stats) {
    total.recorded += each.recorded;
    total.written += each.written;
    total.buffered += each.buffered;
    total.batchesWritten += each.batchesWritten;
    total.failedWrites += each.failedWrites;
    for (const reason of Object.keys(total.dropped) as (keyof EventPipelineStats["dropped"])[])
      total.dropped[reason] += each.dropped[reason];
  }
  return total;
}

/** Timers, injectable so tests can tick them. */
export interface Scheduler {
  /** Calls `task` every `ms`; returns a function that stops it. Must not keep the process alive. */
  every(ms: number, task: () => void): () => void;
  /** Calls `task` soon, after the current call stack (off the request path). */
  soon(task: () => void): void;
}

export const nodeScheduler: Scheduler = {
  every(ms, task) {
    const timer = setInterval(task, ms);
    timer.unref();
    return () => clearInterval(timer);
  },
  soon(task) {
    setImmediate(task);
  },
};

export interface PipelineLog {
  warn(message: string): void;
}

/** How often at most a dropped-events or failed-write warning is logged. */
const WARNING_INTERVAL_MS = 10_000;

/**
 * The event sink of one raw table: events are added to a batch as they come (the engine decides the batch's form:
 * the embedded one encodes them right away) and written off the request path, when a batch is full or on the
 * flush interval, one batch at a time. What is held is bounded; whatever cannot be kept is counted in stats() and
 * reported in the log, never lost silently. close() writes what is held.
 */
export class EventPipeline<E, B extends EventBatch<E>> implements EventSink<E> {
  private readonly batches: BatchIO<B>;
  private readonly options: EventPipelineOptions;
  private readonly scheduler: Scheduler;
  private readonly clock: Clock;
  private readonly log: PipelineLog | undefined;

  /** The batch events are added to, and full ones waiting to be written, oldest first. */
  private filling: B;
  private full: B[] = [];
  /** Events in `filling` and `full`. */
  private waiting = 0;
  private retry: { batch: B; attempts: number } | undefined;
  private inFlight = 0;
  private draining: Promise<void> | undefined;
  private drainRequested = false;
  private closed = false;
  private readonly stopTimer: () => void;
  private readonly counters = { recorded: 0, written: 0, bufferFull: 0, writeFailed: 0, afterClose: 0, batchesWritten: 0, failedWrites: 0 };
  private readonly lastWarningAt = { drop: Number.NEGATIVE_INFINITY, write: Number.NEGATIVE_INFINITY };
  private droppedSinceWarning = 0;

  constructor(
    batches: BatchIO<B>,
    options: EventPipelineOptions,
    dependencies: { scheduler?: Scheduler; clock: Clock; log?: PipelineLog },
  ) {
    if (options.batchSize > options.maxEvents) throw new Error("batchSize must not exceed maxEvents");
    this.batches = batches;
    this.filling = batches.create();
    this.options = options;
    this.scheduler = dependencies.scheduler ?? nodeScheduler;
    this.clock = dependencies.clock;
    this.log = dependencies.log;
    this.stopTimer = this.scheduler.every(options.flushIntervalMs, () => this.drainInBackground(true));
  }

  record(event: E): void {
    this.counters.recorded++;
    if (this.closed) {
      this.counters.afterClose++;
      this.noteDrop(1, "keygate is closing");
      return;
    }
    if (this.isFull() && this.options.keepWhenFull !== true) {
      this.counters.bufferFull++;
      this.noteDrop(1, "the buffer is full");
      return;
    }
    try {
      this.filling.add(event);
    } catch (error) {
      this.counters.writeFailed++;
      this.noteDrop(1, `it could not be encoded (${(error as Error).message})`);
      return;
    }
    this.waiting++;
    if (this.filling.size < this.options.batchSize) return;
    this.full.push(this.filling);
    this.filling = this.batches.create();
    if (!this.retry && !this.drainRequested) {
      this.drainRequested = true;
      this.scheduler.soon(() => {
        this.drainRequested = false;
        this.drainInBackground(false);
      });
    }
  }

  /** Writes everything buffered now (a batch waiting for a retry included) and resolves when done. */
  async flush(): Promise<void> {
    await this.draining;
    await this.startDrain(true);
  }

  /** Stops the timer and writes what is buffered, each batch once; what fails then is dropped and counted. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopTimer();
    await this.draining;
    const remaining = [...(this.retry ? [this.retry.batch] : []), ...this.full, this.filling].filter((batch) => batch.size > 0);
    this.retry = undefined;
    this.full = [];
    this.waiting = 0;
    for (const batch of remaining) {
      if (!(await this.tryWrite(batch))) {
        this.counters.writeFailed += batch.size;
        this.noteDrop(batch.size, "their batch could not be written while closing");
      }
      this.batches.release(batch);
    }
  }

  stats(): EventPipelineStats {
    const { recorded, written, bufferFull, writeFailed, afterClose, batchesWritten, failedWrites } = this.counters;
    return {
      recorded,
      written,
      buffered: this.held(),
      dropped: { bufferFull, writeFailed, afterClose, disabled: 0 },
      batchesWritten,
      failedWrites,
    };
  }

  /** Whether maxEvents are held now. */
  isFull(): boolean {
    return this.held() >= this.options.maxEvents;
  }

  private held(): number {
    // A batch waiting for a retry is not in flight; one being written is in neither of the other two.
    return this.waiting + (this.retry?.batch.size ?? 0) + this.inFlight;
  }

  /** One drain at a time. `everything`: also a partial batch (the timer); otherwise full batches only. */
  /** A drain nobody waits for (the timer's, a full batch's): a failure nothing caught is logged, not left floating. */
  private drainInBackground(everything: boolean): void {
    this.startDrain(everything).catch((error: unknown) =>
      this.warn("write", `analytics: writing events failed: ${(error as Error).message}`),
    );
  }

  private startDrain(everything: boolean): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (!this.draining) {
      this.draining = this.drain(everything).finally(() => {
        this.draining = undefined;
      });
    }
    return this.draining;
  }

  private async drain(everything: boolean): Promise<void> {
    if (this.retry) {
      // A failed batch is retried only on the timer's pace, so a broken engine is not hammered.
      if (!everything) return;
      const retry = this.retry;
      if (!(await this.tryWrite(retry.batch))) {
        retry.attempts++;
        if (retry.attempts >= this.options.maxWriteAttempts) {
          this.retry = undefined;
          this.counters.writeFailed += retry.batch.size;
          this.noteDrop(retry.batch.size, `their batch failed ${retry.attempts} times`);
          this.batches.release(retry.batch);
        }
        return;
      }
      this.retry = undefined;
      this.batches.release(retry.batch);
    }
    // A partial batch is written only if it was waiting when the drain began: events that arrive during a write wait
    // for a full batch or the next interval. Writing them at once would turn a busy stream into back-to-back small
    // inserts, and every insert has a fixed cost in the engine (about 0.1 s of CPU with the four aggregates).
    if (everything && this.filling.size > 0) {
      this.full.push(this.filling);
      this.filling = this.batches.create();
    }
    for (let batch = this.full.shift(); batch; batch = this.full.shift()) {
      this.waiting -= batch.size;
      if (!(await this.tryWrite(batch))) {
        this.retry = { batch, attempts: 1 };
        return;
      }
      this.batches.release(batch);
    }
  }

  private async tryWrite(batch: B): Promise<boolean> {
    const retrying = batch === this.retry?.batch;
    if (!retrying) this.inFlight += batch.size;
    try {
      await this.batches.write(batch);
      this.counters.written += batch.size;
      this.counters.batchesWritten++;
      return true;
    } catch (error) {
      this.counters.failedWrites++;
      this.warn("write", `analytics: writing ${batch.size} ${batch.table.description} failed: ${(error as Error).message}`);
      return false;
    } finally {
      if (!retrying) this.inFlight -= batch.size;
    }
  }

  private noteDrop(count: number, reason: string): void {
    this.droppedSinceWarning += count;
    this.warn(
      "drop",
      `analytics: dropped ${this.droppedSinceWarning} ${this.filling.table.description} (latest because ${reason}); see keygate_analytics_events_dropped_total`,
      () => {
        this.droppedSinceWarning = 0;
      },
    );
  }

  /** Logs at most one warning of each kind per WARNING_INTERVAL_MS, so an outage cannot flood the log. */
  private warn(kind: "drop" | "write", message: string, onLogged?: () => void): void {
    const now = this.clock.now();
    if (!this.log || now - this.lastWarningAt[kind] < WARNING_INTERVAL_MS) return;
    this.lastWarningAt[kind] = now;
    this.log.warn(message);
    onLogged?.();
  }
}
