import type { AnalyticsQueryEngine } from "../domain/analytics/query-engine.js";
import type { AuditLogQuery, AuditLogReader } from "../domain/audit/audit-log-service.js";
import type { AuditActorType, AuditChange, AuditEntry, AuditSink } from "../domain/audit/audit-trail.js";
import { KeygateError } from "../errors/keygate-error.js";
import type { AuditOutbox } from "../storage/audit-outbox-interfaces.js";
import type { PipelineLog, Scheduler } from "./pipeline.js";
import { AUDIT_LOGS } from "./rows.js";

/** The audit log as the analytics runtime keeps it: where entries go and where they are read back. */
export interface AuditLog extends AuditSink, AuditLogReader {
  /** One line for the start-up banner. */
  describe(): string;
}

/** The part of an event pipeline the audit log needs (EventPipeline with keepWhenFull). */
export interface AuditPipeline {
  record(entry: AuditEntry): void;
  isFull(): boolean;
  flush(): Promise<void>;
  /** Entries recorded and entries the engine took, both since the start; the engine takes them in order. */
  stats(): { recorded: number; written: number };
}

export function auditLogUnavailable(): KeygateError {
  return new KeygateError(
    "err:keygate:data:audit_log_unavailable",
    "The audit log cannot take this write's entry now (its buffer is full and the analytics engine does not take writes); nothing was changed. Try again later.",
  );
}

/**
 * A write was made but its entry could not be made durable before the answer (the outbox or the engine did not take
 * it): the entry is kept in memory and tried again, and the client is told the write's outcome is not confirmed.
 */
export function auditEntryNotDurable(cause: unknown): KeygateError {
  return new KeygateError(
    "err:keygate:data:audit_log_unavailable",
    "This write was made, but its audit entry could not be stored durably yet (keygate keeps it and tries again). Read the resource back to confirm the change.",
    { cause },
  );
}

/**
 * The audit log written straight into a ClickHouse server (audit_logs_v1) through its own pipeline: with in-memory
 * stores there is no outbox, and the server is itself durable. The pipeline keeps every entry it is given; a write
 * asks admit() first, which waits for one flush when the buffer is full and then fails with 503 if it still is, so
 * no write succeeds without its entry; settled() flushes, so a write is answered once the server has its entry.
 * Reads flush first, so this instance's own recent writes are in the answer.
 */
export class PipelineAuditLog implements AuditLog {
  private readonly pipeline: AuditPipeline;
  private readonly engine: AnalyticsQueryEngine;

  constructor(pipeline: AuditPipeline, engine: AnalyticsQueryEngine) {
    this.pipeline = pipeline;
    this.engine = engine;
  }

  record(entry: AuditEntry): void {
    this.pipeline.record(entry);
  }

  async admit(): Promise<void> {
    if (!this.pipeline.isFull()) return;
    await this.pipeline.flush();
    if (this.pipeline.isFull()) throw auditLogUnavailable();
  }

  async settled(): Promise<void> {
    const recorded = this.pipeline.stats().recorded;
    await this.pipeline.flush();
    // The pipeline writes in order and never drops an audit entry: written short of recorded means a failed batch.
    if (this.pipeline.stats().written < recorded) throw auditEntryNotDurable(new Error("the analytics engine did not take the batch"));
  }

  async list(query: AuditLogQuery): Promise<AuditEntry[]> {
    await this.pipeline.flush();
    return listFromEngine(this.engine, query);
  }

  describe(): string {
    return `audit log: ${AUDIT_LOGS.name} in the analytics engine, each entry written there before its write is answered`;
  }
}

async function listFromEngine(engine: AnalyticsQueryEngine, query: AuditLogQuery): Promise<AuditEntry[]> {
  const { sql, params } = auditLogSelect(engine.database, query);
  const rows = await engine.withConnection((connection) => connection.rows(sql, params));
  return rows.map(entryOfRow);
}

/** How OutboxAuditLog writes entries to the engine and logs what fails in the background. */
export interface OutboxAuditLogDeps {
  outbox: AuditOutbox;
  engine: AnalyticsQueryEngine;
  /** Inserts entries into audit_logs_v1 (one batch). */
  write(entries: readonly AuditEntry[]): Promise<void>;
  /** Entries waiting for the outbox at most before admit() refuses a write (analytics.buffer.maxEvents). */
  maxUnsent: number;
  /** Entries moved to the engine per insert (analytics.buffer.batchSize). */
  batchSize: number;
  /** How often the pump moves entries to the engine, and a failed append is tried again. */
  intervalMs: number;
  scheduler: Scheduler;
  log?: PipelineLog;
}

/**
 * The audit log behind a durable outbox (docs/audit-log.md#what-survives-what): record() queues the entry for the
 * outbox, and one append at a time takes everything queued (a group commit: concurrent writes share one Redis call
 * or one fsync of the journal). settled() resolves once the outbox holds every entry recorded before it was asked,
 * so a write is answered only then. A pump moves entries from the outbox into the engine, oldest first, and removes
 * them only once the engine has them: a crash between the two writes an entry again, which the reads count once
 * (auditLogSelect keeps one row per audit_id).
 */
export class OutboxAuditLog implements AuditLog {
  private readonly deps: OutboxAuditLogDeps;
  private unsent: AuditEntry[] = [];
  /** Entries given to record(), and entries the outbox holds, since the start; the outbox takes them in order. */
  private recorded = 0;
  private appended = 0;
  private appending: Promise<void> | undefined;
  private waiters: { upTo: number; resolve: () => void; reject: (error: unknown) => void }[] = [];
  private pumping: Promise<void> | undefined;
  private pumpFailing = false;
  private readonly stopTimer: () => void;
  private closed = false;

  constructor(deps: OutboxAuditLogDeps) {
    this.deps = deps;
    this.stopTimer = deps.scheduler.every(deps.intervalMs, () => {
      if (this.unsent.length > 0) this.startAppending();
      // Said once when moving starts failing and once when it works again, however long the engine is away.
      this.pump().then(
        () => {
          if (this.pumpFailing) this.deps.log?.warn("audit log: moving entries to the engine works again");
          this.pumpFailing = false;
        },
        (error: unknown) => {
          if (!this.pumpFailing) this.deps.log?.warn(`audit log: moving entries to the engine failed: ${(error as Error).message}`);
          this.pumpFailing = true;
        },
      );
    });
  }

  record(entry: AuditEntry): void {
    this.unsent.push(entry);
    this.recorded++;
    this.startAppending();
  }

  async admit(): Promise<void> {
    if (this.recorded - this.appended < this.deps.maxUnsent) return;
    await this.settled().catch(() => {});
    if (this.recorded - this.appended >= this.deps.maxUnsent) throw auditLogUnavailable();
  }

  settled(): Promise<void> {
    if (this.appended >= this.recorded) return Promise.resolve();
    const upTo = this.recorded;
    return new Promise((resolve, reject) => {
      this.waiters.push({ upTo, resolve, reject });
      this.startAppending();
    });
  }

  async list(query: AuditLogQuery): Promise<AuditEntry[]> {
    // Whatever waits in the outbox (this instance's and, on Redis, every other's) is in the answer.
    await this.settled().catch(() => {});
    // A pass already under way may have read the outbox before this instance's latest entries got there.
    await this.pumping?.catch(() => {});
    await this.pump();
    return listFromEngine(this.deps.engine, query);
  }

  describe(): string {
    return `audit log: ${AUDIT_LOGS.name} in the analytics engine; ${this.deps.outbox.describe()}`;
  }

  /** Appends what is queued and moves everything in the outbox to the engine (tests and tools; the timer does it anyway). */
  async flush(): Promise<void> {
    await this.settled();
    await this.pumping?.catch(() => {});
    await this.pump();
  }

  /** Stops the timer, appends what is queued and moves what it can to the engine. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopTimer();
    await this.settled().catch(() => {});
    await this.pump().catch(() => {});
  }

  private startAppending(): void {
    this.appending ??= this.appendQueued().then((drained) => {
      this.appending = undefined;
      // An entry recorded after the last group was taken, and before this ran, is not left for the timer.
      if (drained && this.unsent.length > 0) this.startAppending();
    });
  }

  /**
   * Appends what is queued, a group at a time, until nothing is; a failed group stays queued for the next try.
   * Resolves with false after a failure (the next try comes with the next write, settled() or the timer).
   */
  private async appendQueued(): Promise<boolean> {
    while (this.unsent.length > 0) {
      const group = this.unsent;
      this.unsent = [];
      try {
        await this.deps.outbox.append(group.map((entry) => JSON.stringify(entry)));
      } catch (error) {
        this.unsent = [...group, ...this.unsent];
        const failed = this.waiters;
        this.waiters = [];
        for (const waiter of failed) waiter.reject(auditEntryNotDurable(error));
        this.deps.log?.warn(`audit log: ${group.length} entries could not be appended to the outbox: ${(error as Error).message}`);
        return false;
      }
      this.appended += group.length;
      const waiting: typeof this.waiters = [];
      for (const waiter of this.waiters) {
        if (waiter.upTo <= this.appended) waiter.resolve();
        else waiting.push(waiter);
      }
      this.waiters = waiting;
    }
    return true;
  }

  /** Moves the outbox's entries into the engine, a batch at a time; one pass at a time. */
  private pump(): Promise<void> {
    this.pumping ??= this.moveToEngine().finally(() => {
      this.pumping = undefined;
    });
    return this.pumping;
  }

  private async moveToEngine(): Promise<void> {
    for (;;) {
      const items = await this.deps.outbox.peek(this.deps.batchSize);
      if (items.length === 0) return;
      await this.deps.write(items.map((item) => JSON.parse(item.record) as AuditEntry));
      await this.deps.outbox.remove(items.map((item) => item.handle));
      if (items.length < this.deps.batchSize) return;
    }
  }
}

/** The SELECT of one page; every value a bound parameter. */
export function auditLogSelect(database: string, query: AuditLogQuery): { sql: string; params: Record<string, string> } {
  const params: Record<string, string> = { workspaceId: query.workspaceId };
  const where = ["workspace_id = {workspaceId:String}"];
  const add = (name: string, value: string | number | undefined, condition: string) => {
    if (value === undefined) return;
    params[name] = String(value);
    where.push(condition);
  };
  add("start", query.start, "time >= toInt64({start:String})");
  add("end", query.end, "time <= toInt64({end:String})");
  add("actorType", query.actorType, "actor_type = {actorType:String}");
  add("actorId", query.actorId, "actor_id = {actorId:String}");
  add("action", query.action, "action = {action:String}");
  if (query.resourceType !== undefined && query.resourceId !== undefined) {
    params.resourceType = query.resourceType;
    params.resourceId = query.resourceId;
    where.push("arrayExists((t, i) -> t = {resourceType:String} AND i = {resourceId:String}, resource_types, resource_ids)");
  } else {
    add("resourceType", query.resourceType, "has(resource_types, {resourceType:String})");
    add("resourceId", query.resourceId, "has(resource_ids, {resourceId:String})");
  }
  if (query.before) {
    params.beforeTime = String(query.before.time);
    params.beforeId = query.before.id;
    where.push("(time < toInt64({beforeTime:String}) OR (time = toInt64({beforeTime:String}) AND audit_id < {beforeId:String}))");
  }
  const sql = `SELECT audit_id, time, workspace_id, actor_type, actor_id, actor_name, action, description, resource_types,
    resource_ids, changes, request_id, client_address, user_agent
    FROM ${database}.${AUDIT_LOGS.name} WHERE ${where.join(" AND ")}
    ORDER BY time DESC, audit_id DESC LIMIT 1 BY audit_id LIMIT ${Math.max(1, Math.trunc(query.limit))}`;
  return { sql, params };
}

function entryOfRow(row: Record<string, unknown>): AuditEntry {
  const types = row.resource_types as string[];
  const ids = row.resource_ids as string[];
  return {
    id: String(row.audit_id),
    time: Number(row.time),
    workspaceId: String(row.workspace_id),
    actor: { type: row.actor_type as AuditActorType, id: String(row.actor_id), name: String(row.actor_name) },
    action: row.action as AuditEntry["action"],
    description: String(row.description),
    resources: types.map((type, index) => ({ type, id: ids[index] as string })),
    changes: JSON.parse(String(row.changes)) as AuditChange[],
    requestId: String(row.request_id),
    clientAddress: String(row.client_address),
    userAgent: String(row.user_agent),
  };
}

/**
 * With analytics off: the most recent `capacity` entries of this process, in memory, lost at restart (the banner
 * says so). Enough to answer listAuditLogs on a single instance; a deployment that must keep its audit log runs
 * analytics.
 */
export class MemoryAuditLog implements AuditLog {
  private readonly entries: AuditEntry[] = [];
  private readonly capacity: number;

  constructor(capacity = MEMORY_AUDIT_CAPACITY) {
    this.capacity = capacity;
  }

  record(entry: AuditEntry): void {
    this.entries.push(entry);
    if (this.entries.length > this.capacity) this.entries.shift();
  }

  async admit(): Promise<void> {}

  /** Nothing here outlives the process: an entry is as durable as it will ever be once recorded. */
  async settled(): Promise<void> {}

  async list(query: AuditLogQuery): Promise<AuditEntry[]> {
    return (
      this.entries
        .filter((entry) => matches(entry, query))
        // Ids are unique: no two entries compare equal.
        .sort((a, b) => b.time - a.time || (a.id < b.id ? 1 : -1))
        .slice(0, query.limit)
    );
  }

  describe(): string {
    return `audit log: in memory only, the last ${this.capacity} entries of this process, all lost when it stops or crashes (analytics is off)`;
  }
}

export const MEMORY_AUDIT_CAPACITY = 10_000;

function matches(entry: AuditEntry, query: AuditLogQuery): boolean {
  const before = query.before;
  return (
    entry.workspaceId === query.workspaceId &&
    (query.start === undefined || entry.time >= query.start) &&
    (query.end === undefined || entry.time <= query.end) &&
    (query.actorType === undefined || entry.actor.type === query.actorType) &&
    (query.actorId === undefined || entry.actor.id === query.actorId) &&
    (query.action === undefined || entry.action === query.action) &&
    ((query.resourceType === undefined && query.resourceId === undefined) ||
      entry.resources.some(
        (resource) =>
          (query.resourceType === undefined || resource.type === query.resourceType) &&
          (query.resourceId === undefined || resource.id === query.resourceId),
      )) &&
    (before === undefined || entry.time < before.time || (entry.time === before.time && entry.id < before.id))
  );
}
