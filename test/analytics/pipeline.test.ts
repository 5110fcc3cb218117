import t from "tap";
import { EventList } from "../../src/analytics/analytics-engine.js";
import { EventPipeline, type EventPipelineOptions, type Scheduler } from "../../src/analytics/pipeline.js";
import { VERIFICATIONS } from "../../src/analytics/rows.js";
import type { VerificationEvent } from "../../src/domain/analytics/events.js";
import { event } from "../helpers/analytics.js";
import { ManualClock } from "../helpers/clock.js";

/** Timers the test fires by hand: tick() runs the interval task, settle() runs what was scheduled soon. */
class ManualScheduler implements Scheduler {
  private interval: (() => void) | undefined;
  private soonTasks: (() => void)[] = [];
  stopped = false;

  every(_ms: number, task: () => void): () => void {
    this.interval = task;
    return () => {
      this.stopped = true;
    };
  }

  soon(task: () => void): void {
    this.soonTasks.push(task);
  }

  get pendingSoon(): number {
    return this.soonTasks.length;
  }

  async tick(): Promise<void> {
    this.interval?.();
    await settle();
  }

  async runSoon(): Promise<void> {
    const tasks = this.soonTasks;
    this.soonTasks = [];
    for (const task of tasks) task();
    await settle();
  }
}

/** Lets pending promise callbacks (the fake writer, the drain loop) run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
  await new Promise((resolve) => setImmediate(resolve));
}

interface Writer {
  batches: VerificationEvent[][];
  fail: boolean;
  /** When set, writes wait until release() is called. */
  hold: boolean;
  release(): void;
  write(events: VerificationEvent[]): Promise<void>;
}

function writer(): Writer {
  let waiting: (() => void)[] = [];
  const w: Writer = {
    batches: [],
    fail: false,
    hold: false,
    release() {
      const all = waiting;
      waiting = [];
      for (const resolve of all) resolve();
    },
    async write(events) {
      if (w.hold) await new Promise<void>((resolve) => waiting.push(resolve));
      if (w.fail) throw new Error("engine down");
      w.batches.push(events);
    },
  };
  return w;
}

const OPTIONS: EventPipelineOptions = { maxEvents: 10, batchSize: 4, flushIntervalMs: 1_000, maxWriteAttempts: 3 };

function setup(options: Partial<EventPipelineOptions> = {}) {
  const scheduler = new ManualScheduler();
  const w = writer();
  const warnings: string[] = [];
  const clock = new ManualClock();
  const released: EventList<VerificationEvent>[] = [];
  const batches = {
    create: () => new EventList(VERIFICATIONS, ""),
    write: (batch: EventList<VerificationEvent>) => w.write(batch.events),
    release: (batch: EventList<VerificationEvent>) => released.push(batch),
  };
  const pipeline = new EventPipeline(
    batches,
    { ...OPTIONS, ...options },
    { scheduler, clock, log: { warn: (message) => warnings.push(message) } },
  );
  return { pipeline, scheduler, writer: w, warnings, clock, released };
}

t.test("record() returns at once and writes nothing on the caller's stack", async (t) => {
  const { pipeline, writer, scheduler } = setup();
  for (let i = 0; i < 4; i++) t.equal(pipeline.record(event()), undefined);
  t.equal(writer.batches.length, 0, "a full batch is only scheduled");
  t.equal(scheduler.pendingSoon, 1, "once");
  await scheduler.runSoon();
  t.same(
    writer.batches.map((batch) => batch.length),
    [4],
  );
});

t.test("a full batch is written as soon as it is full; a partial one on the flush interval", async (t) => {
  const { pipeline, writer, scheduler } = setup();
  const events = Array.from({ length: 6 }, () => event());
  for (const e of events) pipeline.record(e);
  await scheduler.runSoon();
  t.same(writer.batches, [events.slice(0, 4)], "the first four, in order");
  t.equal(pipeline.stats().buffered, 2);
  await scheduler.tick();
  t.same(writer.batches, [events.slice(0, 4), events.slice(4)], "the rest on the tick");
  t.match(pipeline.stats(), { recorded: 6, written: 6, buffered: 0, batchesWritten: 2 });
});

t.test("events that arrive while the interval's write runs wait for the next interval or a full batch", async (t) => {
  const { pipeline, writer, scheduler } = setup();
  const first = event();
  pipeline.record(first);
  writer.hold = true;
  await scheduler.tick();
  const during = [event(), event()];
  for (const e of during) pipeline.record(e);
  writer.hold = false;
  writer.release();
  await settle();
  t.same(writer.batches, [[first]], "one insert per interval, not one per write's duration");
  t.equal(pipeline.stats().buffered, 2);
  await scheduler.tick();
  t.same(writer.batches, [[first], during], "the rest on the next interval");

  writer.hold = true;
  pipeline.record(event());
  await scheduler.tick();
  const full = Array.from({ length: 4 }, () => event());
  for (const e of full) pipeline.record(e);
  writer.hold = false;
  writer.release();
  await settle();
  t.same(writer.batches.at(-1), full, "a batch that fills during a write is written after it");
});

t.test("the buffer is bounded: what does not fit is dropped, counted and reported", async (t) => {
  const { pipeline, writer, scheduler, warnings } = setup();
  writer.hold = true;
  for (let i = 0; i < 14; i++) pipeline.record(event());
  await scheduler.runSoon();
  // The buffer holds 10 at most, the batch being written included.
  t.match(pipeline.stats(), { recorded: 14, buffered: 10, dropped: { bufferFull: 4 } });
  pipeline.record(event());
  t.equal(pipeline.stats().dropped.bufferFull, 5, "a batch in flight still counts against the bound");
  t.equal(warnings.length, 1, "one warning");
  t.match(warnings[0], /dropped 1 verification events .*buffer is full/);
  writer.hold = false;
  writer.release();
  await settle();
  await scheduler.tick();
  t.equal(pipeline.stats().written, 10, "everything kept is written");
  t.equal(pipeline.stats().buffered, 0);
});

t.test("warnings about drops are rate-limited, counters are not", async (t) => {
  const { pipeline, writer, warnings, clock } = setup({ maxEvents: 4, batchSize: 4 });
  writer.hold = true;
  for (let i = 0; i < 100; i++) pipeline.record(event());
  t.equal(warnings.length, 1);
  clock.advance(10_000);
  pipeline.record(event());
  t.equal(warnings.length, 2, "another after the interval");
  t.match(warnings[1], /dropped 96 verification events/, "it reports how many since the last warning");
  t.equal(pipeline.stats().dropped.bufferFull, 97);
});

t.test("a failed batch is retried on the interval and dropped, counted, after the last attempt", async (t) => {
  const { pipeline, writer, scheduler, warnings } = setup();
  writer.fail = true;
  for (let i = 0; i < 4; i++) pipeline.record(event());
  await scheduler.runSoon();
  t.match(pipeline.stats(), { failedWrites: 1, buffered: 4, written: 0 });
  for (let i = 0; i < 4; i++) pipeline.record(event());
  await scheduler.runSoon();
  t.equal(pipeline.stats().failedWrites, 1, "a full batch does not retry the failed one before the interval");
  await scheduler.tick();
  t.equal(pipeline.stats().failedWrites, 2);
  await scheduler.tick();
  t.match(pipeline.stats(), { failedWrites: 3, dropped: { writeFailed: 4 }, buffered: 4 }, "third failure: the batch is dropped");
  t.match(warnings.join("\n"), /writing 4 verification events failed: engine down/);
  writer.fail = false;
  await scheduler.tick();
  t.match(pipeline.stats(), { written: 4, buffered: 0 }, "later events still go through");
});

t.test("a batch that fails once and then succeeds is written whole, in order", async (t) => {
  const { pipeline, writer, scheduler } = setup();
  writer.fail = true;
  const events = Array.from({ length: 5 }, () => event());
  for (const e of events) pipeline.record(e);
  await scheduler.runSoon();
  writer.fail = false;
  await scheduler.tick();
  t.same(writer.batches, [events.slice(0, 4), events.slice(4)]);
  t.match(pipeline.stats(), { written: 5, dropped: { writeFailed: 0 } });
});

t.test("close() writes everything buffered, stops the timer, and counts events that come later", async (t) => {
  const { pipeline, writer, scheduler } = setup({ maxEvents: 10, batchSize: 4 });
  for (let i = 0; i < 10; i++) pipeline.record(event());
  await pipeline.close();
  t.same(
    writer.batches.map((batch) => batch.length),
    [4, 4, 2],
  );
  t.ok(scheduler.stopped);
  pipeline.record(event());
  t.match(pipeline.stats(), { recorded: 11, written: 10, dropped: { afterClose: 1 } });
  await pipeline.close();
  t.equal(writer.batches.length, 3, "closing twice writes nothing more");
});

t.test("close() tries a failing engine once per batch and counts the loss", async (t) => {
  const { pipeline, writer } = setup();
  writer.fail = true;
  for (let i = 0; i < 6; i++) pipeline.record(event());
  await pipeline.close();
  t.match(pipeline.stats(), { written: 0, dropped: { writeFailed: 6 }, failedWrites: 2 });
});

t.test("close() waits for a write in progress", async (t) => {
  const { pipeline, writer, scheduler } = setup();
  writer.hold = true;
  for (let i = 0; i < 5; i++) pipeline.record(event());
  await scheduler.runSoon();
  let closed = false;
  const closing = pipeline.close().then(() => (closed = true));
  await settle();
  t.equal(closed, false);
  writer.hold = false;
  writer.release();
  await closing;
  t.match(pipeline.stats(), { written: 5, buffered: 0 });
});

t.test("flush() writes a partial batch now", async (t) => {
  const { pipeline, writer } = setup();
  pipeline.record(event());
  await pipeline.flush();
  t.equal(writer.batches.length, 1);
});

t.test("every batch is released once, after it is written or given up, never while it is written", async (t) => {
  const { pipeline, writer, scheduler, released } = setup({ maxWriteAttempts: 2 });
  for (let i = 0; i < 4; i++) pipeline.record(event());
  writer.hold = true;
  await scheduler.runSoon();
  t.equal(released.length, 0, "not while its write is in progress");
  writer.hold = false;
  writer.release();
  await settle();
  t.equal(released.length, 1, "written");

  writer.fail = true;
  pipeline.record(event());
  await scheduler.tick();
  t.equal(released.length, 1, "a failed batch is kept for its retry");
  await scheduler.tick();
  t.equal(released.length, 2, "given up after the last attempt");
  t.match(pipeline.stats(), { dropped: { writeFailed: 1 } });

  writer.fail = false;
  for (let i = 0; i < 6; i++) pipeline.record(event());
  await pipeline.close();
  t.equal(released.length, 4, "close() releases what it wrote");
  t.equal(new Set(released).size, released.length, "each batch once");
});

t.test("an event its batch cannot take is dropped and counted; the batch and the events around it are kept", async (t) => {
  const scheduler = new ManualScheduler();
  const w = writer();
  const warnings: string[] = [];
  const refusing = () => {
    const list = new EventList(VERIFICATIONS, "");
    const add = list.add.bind(list);
    list.add = (each) => {
      if (each.requestId === "req_unencodable") throw new TypeError("a tag is not a string");
      add(each);
    };
    return list;
  };
  const pipeline = new EventPipeline({ create: refusing, write: (batch) => w.write(batch.events), release: () => {} }, OPTIONS, {
    scheduler,
    clock: new ManualClock(),
    log: { warn: (message) => warnings.push(message) },
  });
  const kept = [event(), event()];
  pipeline.record(kept[0]!);
  t.doesNotThrow(() => pipeline.record(event({ requestId: "req_unencodable" })), "record() never throws");
  pipeline.record(kept[1]!);
  await scheduler.tick();
  t.same(w.batches, [kept]);
  t.match(pipeline.stats(), { recorded: 3, written: 2, buffered: 0, dropped: { writeFailed: 1 } });
  t.match(warnings.join("\n"), /dropped 1 verification events .*could not be encoded \(a tag is not a string\)/);
});

t.test("a batch larger than the buffer is refused as configuration", async (t) => {
  t.throws(() => setup({ maxEvents: 2, batchSize: 3 }), /batchSize must not exceed maxEvents/);
});
