import type { AnalyticsQueryEngine } from "../domain/analytics/query-engine.js";
import type { AuditLogQuery, AuditLogReader } from "../domain/audit/audit-log-service.js";
import type { AuditActorType, AuditChange, AuditEntry, AuditSink } from "../domain/audit/audit-trail.js";
import { KeygateError } from "../errors/keygate-error.js";
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
}

export function auditLogUnavailable(): KeygateError {
  return new KeygateError(
    "err:keygate:data:audit_log_unavailable",
    "The audit log cannot take this write's entry now (its buffer is full and the analytics engine does not take writes); nothing was changed. Try again later.",
  );
}

/**
 * The audit log in the analytics engine (audit_logs_v1), written through its own pipeline. The pipeline keeps every
 * entry it is given; a write asks admit() first, which waits for one flush when the buffer is full and then
 * fails with 503 if it still is, so no write succeeds without its entry. Reads flush first, so this instance's own
 * recent writes are in the answer.
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

  async list(query: AuditLogQuery): Promise<AuditEntry[]> {
    await this.pipeline.flush();
    const { sql, params } = auditLogSelect(this.engine.database, query);
    const rows = await this.engine.withConnection((connection) => connection.rows(sql, params));
    return rows.map(entryOfRow);
  }

  describe(): string {
    return `audit log: ${AUDIT_LOGS.name} in the analytics engine`;
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
    ORDER BY time DESC, audit_id DESC LIMIT ${Math.max(1, Math.trunc(query.limit))}`;
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
    return `audit log: in memory only, the last ${this.capacity} entries of this process (analytics is off)`;
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
