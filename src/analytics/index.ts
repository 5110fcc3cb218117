import type { AnalyticsSinks } from "../domain/analytics/events.js";
import { AnalyticsEngineError, type AnalyticsQueryEngine } from "../domain/analytics/query-engine.js";
import type { RetentionDays } from "../domain/analytics/tables.js";
import type { Clock } from "../lib/clock.js";
import { defined } from "../lib/defined.js";
import type { AnalyticsEngine, EventBatch } from "./analytics-engine.js";
import { type AuditLog, MemoryAuditLog, PipelineAuditLog } from "./audit-log.js";
import { EmbeddedEngine } from "./embedded-engine.js";
import { addStats, type BatchIO, EventPipeline, type EventPipelineStats, type PipelineLog, type Scheduler } from "./pipeline.js";
import { AUDIT_LOGS, CREDIT_REFUNDS, type EventTable, GATEWAY_REQUESTS, RATELIMITS, VERIFICATIONS } from "./rows.js";
import { schemaStatements } from "./schema.js";
import type { ServerEngineOptions } from "./server-engine.js";

/** The embedded engine's database; a ClickHouse server's is configured (analytics.clickhouse.database). */
export const EMBEDDED_DATABASE = "keygate";

/** A batch that failed this many times in a row (one try per flush interval) is dropped. */
export const MAX_WRITE_ATTEMPTS = 10;

/** The oldest ClickHouse that has everything the query guard relies on (the analyzer by default, formatQuery…). */
export const MINIMUM_SERVER_VERSION = [24, 3] as const;

/** What openAnalytics reads of the configuration's `analytics` section (docs/configuration.md). */
export interface AnalyticsSettings {
  engine: "embedded" | "clickhouse" | "off";
  /** The embedded engine's data directory. */
  path: string;
  clickhouse: { url?: string | undefined; database: string; username: string; password: string; requestTimeoutMs: number };
  region: string;
  buffer: { maxEvents: number; batchSize: number; flushIntervalMs: number };
  retentionDays: RetentionDays;
  query: { maxConcurrent: number };
}

/** Analytics as the process runs it: the engine (if any), the event sinks, their counters (added up) and its shutdown. */
export interface AnalyticsRuntime {
  readonly mode: AnalyticsSettings["engine"];
  /** undefined when analytics is off. */
  readonly engine: AnalyticsQueryEngine | undefined;
  readonly sinks: AnalyticsSinks;
  /** The audit log: in the engine (audit_logs_v1), or in memory when analytics is off. */
  readonly audit: AuditLog;
  stats(): EventPipelineStats;
  /** Writes every event buffered now; resolves when the engine has them (tests and tools; the timer does it anyway). */
  flush(): Promise<void>;
  /** Resolves when the engine can take writes and queries now (readiness); rejects with why not. */
  check(): Promise<void>;
  /** One line for the start-up banner. */
  describe(): string;
  /** Writes what is buffered, then releases the engine. Idempotent. */
  close(): Promise<void>;
}

export interface OpenAnalyticsOptions {
  clock: Clock;
  log?: PipelineLog;
  scheduler?: Scheduler;
  /** Test hook for the clickhouse engine, see ServerEngineOptions.createClient. */
  createClickHouseClient?: ServerEngineOptions["createClient"];
}

export async function openAnalytics(config: AnalyticsSettings, options: OpenAnalyticsOptions): Promise<AnalyticsRuntime> {
  if (config.engine === "off") return disabledAnalytics();

  const engine: AnalyticsEngine =
    config.engine === "embedded"
      ? await EmbeddedEngine.open(config.path, EMBEDDED_DATABASE)
      : new (await serverEngine())({
          url: config.clickhouse.url as string,
          database: config.clickhouse.database,
          username: config.clickhouse.username,
          password: config.clickhouse.password,
          requestTimeoutMs: config.clickhouse.requestTimeoutMs,
          maxConcurrentQueries: config.query.maxConcurrent,
          ...defined({ createClient: options.createClickHouseClient }),
        });
  const ready = new SchemaGate(engine, schemaStatements(engine.database, config.retentionDays), engine.kind === "clickhouse");
  if (engine.kind === "embedded") {
    // The embedded engine is local: a schema it cannot create is a broken installation, so start-up stops.
    await ready.ensure().catch(async (error: unknown) => {
      await engine.close();
      throw new Error(`cannot create the analytics schema in ${engine.location}: ${(error as Error).message}`, { cause: error });
    });
  } else {
    // A ClickHouse server may come later; until it does, queries answer 503 and events wait in the buffer.
    await ready
      .ensure()
      .catch((error: unknown) =>
        options.log?.warn(`analytics: ClickHouse at ${engine.location} is not ready yet: ${(error as Error).message}`),
      );
  }

  const pipelineOf = <E>(table: EventTable<E>, audit = false): EventPipeline<E, EventBatch<E>> => {
    const batches: BatchIO<EventBatch<E>> = {
      create: () => engine.newBatch(table, config.region),
      write: async (batch) => {
        await ready.ensure();
        await engine.insertBatch(batch);
      },
      release: (batch) => engine.releaseBatch(batch),
    };
    return new EventPipeline(
      batches,
      // The audit log's entries are never dropped: kept beyond the buffer and retried until written (docs/audit-log.md).
      audit
        ? { ...config.buffer, maxWriteAttempts: Number.POSITIVE_INFINITY, keepWhenFull: true }
        : { ...config.buffer, maxWriteAttempts: MAX_WRITE_ATTEMPTS },
      {
        clock: options.clock,
        ...defined({ scheduler: options.scheduler, log: options.log }),
      },
    );
  };
  // One pipeline per table, each with the configured buffer: a burst of one kind never crowds out the others.
  const pipelines = {
    verifications: pipelineOf(VERIFICATIONS),
    ratelimits: pipelineOf(RATELIMITS),
    gatewayRequests: pipelineOf(GATEWAY_REQUESTS),
    creditRefunds: pipelineOf(CREDIT_REFUNDS),
  };
  const auditPipeline = pipelineOf(AUDIT_LOGS, true);
  const all = [...Object.values(pipelines), auditPipeline];
  const gatedEngine: AnalyticsQueryEngine = {
    database: engine.database,
    withConnection: async (work) => {
      await ready.ensure();
      return engine.withConnection(work);
    },
  };

  let closing: Promise<void> | undefined;
  return {
    mode: config.engine,
    engine: gatedEngine,
    sinks: pipelines,
    audit: new PipelineAuditLog(auditPipeline, gatedEngine),
    stats: () => addStats(all.map((pipeline) => pipeline.stats())),
    check: () => ready.ensure(),
    flush: async () => {
      await Promise.all(all.map((pipeline) => pipeline.flush()));
    },
    describe: () =>
      engine.kind === "embedded"
        ? `analytics: embedded ClickHouse (chDB), data in ${engine.location}`
        : `analytics: ClickHouse server at ${engine.location}`,
    close: () =>
      (closing ??= Promise.all(all.map((pipeline) => pipeline.close()))
        .then(() => {})
        .finally(() => engine.close())),
  };
}

/** The ClickHouse server's engine, and its client library, loaded only when analytics.engine is clickhouse. */
async function serverEngine() {
  return (await import("./server-engine.js")).ServerEngine;
}

/**
 * Creates the schema once, before the first read or write. A failure is remembered only until the next attempt,
 * so a ClickHouse server that comes up later is picked up without a restart.
 */
class SchemaGate {
  private readonly engine: AnalyticsEngine;
  private readonly statements: readonly string[];
  private readonly checkVersion: boolean;
  private done = false;
  private attempt: Promise<void> | undefined;

  constructor(engine: AnalyticsEngine, statements: readonly string[], checkVersion: boolean) {
    this.engine = engine;
    this.statements = statements;
    this.checkVersion = checkVersion;
  }

  async ensure(): Promise<void> {
    if (this.done) return;
    this.attempt ??= this.create().then(
      () => {
        this.done = true;
      },
      (error: unknown) => {
        this.attempt = undefined;
        throw error instanceof AnalyticsEngineError ? new AnalyticsEngineError("unavailable", error.message, { cause: error }) : error;
      },
    );
    return this.attempt;
  }

  private async create(): Promise<void> {
    if (this.checkVersion) {
      const version = await this.engine.version();
      const [major = 0, minor = 0] = version.split(".").map(Number);
      const [needMajor, needMinor] = MINIMUM_SERVER_VERSION;
      if (major < needMajor || (major === needMajor && minor < needMinor)) {
        throw new AnalyticsEngineError("unavailable", `ClickHouse ${version} is too old; keygate needs ${needMajor}.${needMinor} or newer`);
      }
    }
    for (const statement of this.statements) await this.engine.command(statement);
  }
}

/** analytics.engine: off (and processes such as the CLI that never open analytics). Events are dropped and counted. */
export function disabledAnalytics(): AnalyticsRuntime {
  let recorded = 0;
  return {
    mode: "off",
    engine: undefined,
    sinks: {
      verifications: { record: () => recorded++ },
      ratelimits: { record: () => recorded++ },
      gatewayRequests: { record: () => recorded++ },
      creditRefunds: { record: () => recorded++ },
    },
    audit: new MemoryAuditLog(),
    stats: () => ({
      recorded,
      written: 0,
      buffered: 0,
      dropped: { bufferFull: 0, writeFailed: 0, afterClose: 0, disabled: recorded },
      batchesWritten: 0,
      failedWrites: 0,
    }),
    flush: async () => {},
    check: async () => {},
    describe: () => "analytics: off (analytics.getVerifications answers 412)",
    close: async () => {},
  };
}
