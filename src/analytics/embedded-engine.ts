import { mkdirSync, rmSync } from "node:fs";
import { rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { type AnalyticsConnection, AnalyticsEngineError } from "../domain/analytics/query-engine.js";
import { quoteString, safeId } from "../domain/analytics/sql.js";
import type { AnalyticsEngine, EventBatch } from "./analytics-engine.js";
import { RowBinaryWriter, type RowLayout, rowLayout } from "./row-binary.js";
import { type EventTable, rowStructure } from "./rows.js";

type Chdb = typeof import("chdb");
type Session = InstanceType<Chdb["Session"]>;

/**
 * ClickHouse in the keygate process (chDB), with its data in a directory that survives restarts.
 *
 * chDB runs one statement at a time per connection. Events are written on a long-lived connection of their own, so
 * a long query never holds up the event writer; every analytics request gets a fresh connection (they cost well
 * under a millisecond) that is closed when it is done. A fresh connection per request is also a safety measure:
 * chDB 3.4 was seen handing a connection the result of its previous statement after a failed one, and no request
 * must ever see another's result. All connections share the one directory; libchdb binds a single directory per
 * process, so a second engine in the same process must use the same path.
 *
 * A batch of events goes to the engine as a RowBinary file in `incoming/` under the data directory, read with the
 * `file()` table function and deleted once the insert is done: chDB's insert call takes text formats only, and
 * parsing JSON costs the engine more than the table's own work. chDB locks the directory for one process, so the files there are this process's own.
 */
export class EmbeddedEngine implements AnalyticsEngine {
  readonly kind = "embedded";
  readonly database: string;
  readonly location: string;

  private readonly chdb: Chdb;
  private writer: Session;
  private readonly open = new Set<Session>();
  private readonly incoming: string;
  /**
   * Encoders of batches written, kept for new ones (at most MAX_IDLE_ENCODERS). A batch of 50,000 rows is about 6 MB,
   * and a new buffer per batch would cost the event loop a page fault per 4 KB touched. Each stays at the size of
   * the largest batch it held.
   */
  private readonly idleEncoders: RowBinaryWriter[] = [];
  private closed = false;
  private writerQueue: Promise<void> = Promise.resolve();

  private constructor(chdb: Chdb, location: string, database: string, writer: Session) {
    this.chdb = chdb;
    this.location = location;
    this.database = database;
    this.writer = writer;
    this.open.add(writer);
    this.incoming = join(location, "incoming");
    // What a process that stopped mid-insert left behind was never inserted: its batch had not been acknowledged.
    // Only the first engine of this process on the directory clears it; a second one's files are another's batches.
    if (boundDirectory?.users === 1) rmSync(this.incoming, { recursive: true, force: true });
    mkdirSync(this.incoming, { recursive: true });
  }

  /** Opens (creating when needed) the data directory and `database` in it. */
  static async open(path: string, database: string): Promise<EmbeddedEngine> {
    const location = resolve(path);
    // file() reads these as patterns, and has no escape for them: a batch would be read from other files, or not at all.
    if (GLOB_CHARACTERS.test(location)) {
      throw new Error(
        `the embedded analytics engine cannot use ${location}: its path must not contain *, ?, { or } (set analytics.path elsewhere)`,
      );
    }
    mkdirSync(location, { recursive: true });
    // Loaded on demand: the library is large and only this engine needs it.
    // chdb is an optional dependency (about 540 MB): an installation without it says how to get it.
    const chdb = await import("chdb").catch((error: unknown) => {
      const missing = (error as NodeJS.ErrnoException).code === "ERR_MODULE_NOT_FOUND";
      const why = missing
        ? "it is not installed (an optional dependency: install without --omit=optional, or run `npm install chdb`)"
        : `it cannot be loaded on ${process.platform}-${process.arch}: ${(error as Error).message}`;
      throw new Error(`the embedded analytics engine (chDB) is not available: ${why}; or set analytics.engine to 'clickhouse' or 'off'`, {
        cause: error,
      });
    });
    claimDirectory(location);
    let writer: Session | undefined;
    try {
      writer = new chdb.Session(location);
      await writer.queryAsync(`CREATE DATABASE IF NOT EXISTS ${safeId(database, "database")}`);
      return new EmbeddedEngine(chdb, location, database, writer);
    } catch (error) {
      writer?.close();
      await chdb.drainPending();
      releaseDirectory(location);
      throw new Error(`cannot open the embedded analytics engine in ${location}: ${(error as Error).message}`, { cause: error });
    }
  }

  async withConnection<T>(work: (connection: AnalyticsConnection) => Promise<T>): Promise<T> {
    this.assertOpen();
    const session = new this.chdb.Session(this.location);
    this.open.add(session);
    try {
      // Unqualified table names in customers' queries resolve in the analytics database.
      await session.queryAsync(`USE ${this.database}`).catch(engineError);
      return await work({
        text: async (sql, params) => (await run(session, sql, params, "TSVRaw")).text(),
        rows: async (sql, params) =>
          (await run(session, sql, params, "JSONEachRow"))
            .text()
            .split("\n")
            .filter((line) => line !== "")
            .map((line) => JSON.parse(line) as Record<string, unknown>),
      });
    } finally {
      // Every statement of `work` has settled, so closing cannot cut one short.
      this.open.delete(session);
      session.close();
    }
  }

  async version(): Promise<string> {
    this.assertOpen();
    return (await this.writer.queryAsync("SELECT version()", { format: "TSVRaw" }).catch(engineError)).text().trim();
  }

  async command(sql: string): Promise<void> {
    this.assertOpen();
    await this.writing(() => this.writer.queryAsync(sql).catch((error: unknown) => this.writerFailed(error)));
  }

  /** The writer's connection runs one statement at a time: each table's pipeline waits for the others' inserts. */
  private writing<T>(statement: () => Promise<T>): Promise<T> {
    const turn = this.writerQueue.then(statement);
    this.writerQueue = turn.then(
      () => {},
      () => {},
    );
    return turn;
  }

  /** Events are encoded as they are added, so a batch waiting to be written is bytes, not objects on the heap. */
  newBatch<E>(table: EventTable<E>, region: string): EncodedBatch<E> {
    return new EncodedBatch(table, this.idleEncoders.pop() ?? new RowBinaryWriter(INITIAL_BATCH_ROWS), region);
  }

  async insertBatch(batch: EventBatch<unknown>): Promise<void> {
    this.assertOpen();
    if (!(batch instanceof EncodedBatch)) throw new TypeError("a batch of another engine");
    if (batch.size === 0) return;
    // Event values go as bytes in a file, never as SQL text; the statement names only keygate's own path.
    // Numbered across the process: engines sharing the directory never write the same file.
    const file = join(this.incoming, `batch-${++batchesWritten}.bin`);
    try {
      await writeFile(file, batch.bytes()).catch(engineError);
      const { table } = batch;
      await this.writing(() =>
        this.writer
          .queryAsync(
            `INSERT INTO ${this.database}.${table.name} (${table.columns.map((column) => `\`${column}\``).join(", ")}) SETTINGS ${INSERT_SETTINGS} ` +
              `SELECT * FROM file(${quoteString(file)}, 'RowBinary', ${quoteString(rowStructure(table))})`,
          )
          .catch((error: unknown) => this.writerFailed(error)),
      );
    } finally {
      await rm(file, { force: true });
    }
  }

  releaseBatch(batch: EventBatch<unknown>): void {
    if (!(batch instanceof EncodedBatch) || this.closed || this.idleEncoders.length >= MAX_IDLE_ENCODERS) return;
    this.idleEncoders.push(batch.release());
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.idleEncoders.length = 0;
    for (const session of this.open) session.close();
    this.open.clear();
    await this.chdb.drainPending();
    releaseDirectory(this.location);
  }

  /** After a failure the writer's connection is replaced, so nothing of the failed statement lingers on it. */
  private writerFailed(error: unknown): never {
    this.open.delete(this.writer);
    this.writer.close();
    this.writer = new this.chdb.Session(this.location);
    this.open.add(this.writer);
    return engineError(error);
  }

  private assertOpen(): void {
    if (this.closed) throw new AnalyticsEngineError("unavailable", "the embedded analytics engine is closed");
  }
}

/**
 * Nice value of the engine threads that write events (and keep the aggregates): on a busy machine the CPU goes to
 * serving requests first, while analytics still gets a share (at 19 it would starve and drop events). Lowering a
 * thread's priority needs no privilege.
 */
const BACKGROUND_PRIORITY = 10;

/**
 * Event writes run on one engine thread, at background priority: an insert (and the views it feeds) spread over
 * every core stalls the event loop; one thread keeps up with the same rate and stalls it far less.
 */
const INSERT_SETTINGS = `os_thread_priority = ${BACKGROUND_PRIORITY}, max_threads = 1, max_insert_threads = 1`;

/** Characters that ClickHouse's file() takes as glob patterns in a path. */
const GLOB_CHARACTERS = /[*?{}]/;

/** Rows a new encoder has room for before it grows (reused encoders keep what they grew to). */
const INITIAL_BATCH_ROWS = 1_024;

/** Encoders kept for reuse: the batch being filled and the one being written, the usual case. */
const MAX_IDLE_ENCODERS = 2;

/** How each table's rows are encoded, worked out once per table. */
const layouts = new WeakMap<EventTable<never>, RowLayout>();

/** A batch of the embedded engine: its events as RowBinary rows, encoded as they are added. */
export class EncodedBatch<E> implements EventBatch<E> {
  readonly table: EventTable<E>;
  private readonly layout: RowLayout;
  private readonly encoder: RowBinaryWriter;
  private readonly region: string;
  private rows = 0;

  constructor(table: EventTable<E>, encoder: RowBinaryWriter, region: string) {
    this.table = table;
    const layout = layouts.get(table) ?? rowLayout(table.types);
    layouts.set(table, layout);
    this.layout = layout;
    this.encoder = encoder;
    this.region = region;
  }

  get size(): number {
    return this.rows;
  }

  add(event: E): void {
    this.encoder.write(this.table.values(event, this.region), this.layout);
    this.rows++;
  }

  /** The rows so far (a view of the encoder's memory). */
  bytes(): Buffer {
    return this.encoder.bytes();
  }

  /** Hands the encoder back, emptied; the batch must not be used after. */
  release(): RowBinaryWriter {
    this.encoder.reset();
    this.rows = 0;
    return this.encoder;
  }
}

async function run(session: Session, sql: string, params: Record<string, string> | undefined, format: string) {
  try {
    return params ? await session.queryBindAsync(sql, params, { format }) : await session.queryAsync(sql, { format });
  } catch (error) {
    return engineError(error);
  }
}

function engineError(error: unknown): never {
  if (error instanceof AnalyticsEngineError) throw error;
  const cause = error as { clickhouseCode?: unknown; code?: unknown; message?: unknown };
  if (typeof cause.clickhouseCode === "number") {
    throw new AnalyticsEngineError("query", String(cause.message), { code: cause.clickhouseCode, cause: error });
  }
  throw new AnalyticsEngineError("unavailable", `embedded analytics engine: ${String(cause.message ?? error)}`, { cause: error });
}

/** Batch files written by this process's engines so far. */
let batchesWritten = 0;

/** The directory this process's chDB is bound to, and how many engines use it. */
let boundDirectory: { path: string; users: number } | undefined;

function claimDirectory(path: string): void {
  if (boundDirectory && boundDirectory.path !== path) {
    throw new Error(
      `the embedded analytics engine of this process already uses ${boundDirectory.path}; chDB binds one directory per process`,
    );
  }
  boundDirectory = { path, users: (boundDirectory?.users ?? 0) + 1 };
}

function releaseDirectory(path: string): void {
  if (!boundDirectory || boundDirectory.path !== path) return;
  boundDirectory.users -= 1;
  if (boundDirectory.users === 0) boundDirectory = undefined;
}
