import type { CreditRefundEvent, GatewayRequestEvent, RatelimitEvent, VerificationEvent } from "../domain/analytics/events.js";
import type { AuditEntry } from "../domain/audit/audit-trail.js";

/** The column types of the raw tables, as the engine reads them from a batch. */
export type ColumnType = "String" | "Int32" | "Int64" | "UInt64" | "Float64" | "Bool" | "Array(String)";
export type ColumnValue = string | number | boolean | string[];

/**
 * A raw table events are written to: its columns with their types, and one event's values in that order. The
 * embedded engine encodes the values as RowBinary; a ClickHouse server gets toRow()'s object as JSON, made from the
 * same values, so the two encodings cannot drift apart. Building the array directly cost about a fifth less per
 * row than mapping an object.
 */
export interface EventTable<E> {
  readonly name: string;
  /** What its events are called in log lines: "verification events". */
  readonly description: string;
  readonly columns: readonly string[];
  readonly types: readonly ColumnType[];
  values(event: E, region: string): ColumnValue[];
}

function eventTable<E>(
  name: string,
  description: string,
  columns: Record<string, ColumnType>,
  values: (event: E, region: string) => ColumnValue[],
): EventTable<E> {
  return { name, description, columns: Object.keys(columns), types: Object.values(columns), values };
}

/** Numbers that are not finite would fail the whole batch in the engine; they are written as 0. */
function finite(value: number): number {
  return Number.isFinite(value) ? value : 0;
}

/** An integer column's value: whole, and within what a double holds exactly (so every encoding writes it alike). */
function wholeNumber(value: number): number {
  return Math.min(Number.MAX_SAFE_INTEGER, Math.max(Number.MIN_SAFE_INTEGER, Math.trunc(finite(value))));
}

function unsigned(value: number): number {
  return Math.max(0, wholeNumber(value));
}

function int32(value: number): number {
  return Math.min(2 ** 31 - 1, Math.max(-(2 ** 31), wholeNumber(value)));
}

export const VERIFICATIONS = eventTable<VerificationEvent>(
  "key_verifications_v1",
  "verification events",
  {
    request_id: "String",
    time: "Int64",
    workspace_id: "String",
    key_space_id: "String",
    identity_id: "String",
    external_id: "String",
    key_id: "String",
    // LowCardinality(String) in the table, converted on insert, as outcome.
    region: "String",
    outcome: "String",
    tags: "Array(String)",
    spent_credits: "Int64",
    latency: "Float64",
    // Added after the first release (schema.ts): LowCardinality(String) in the table.
    credits_source: "String",
  },
  (event, region) => [
    event.requestId,
    wholeNumber(event.time),
    event.workspaceId,
    event.keySpaceId,
    event.identityId,
    event.externalId,
    event.keyId,
    region,
    event.outcome,
    event.tags,
    wholeNumber(event.spentCredits),
    finite(event.latencyMs),
    event.creditsSource,
  ],
);

/**
 * Refunds of a verification's credits: a compensating row per refund (the verification's own row is never changed),
 * under the verification's request id and time, so usage subtracts it from the period the verification is in.
 */
export const CREDIT_REFUNDS = eventTable<CreditRefundEvent>(
  "credit_refunds_v1",
  "credit refund events",
  {
    request_id: "String",
    time: "Int64",
    workspace_id: "String",
    key_space_id: "String",
    identity_id: "String",
    external_id: "String",
    key_id: "String",
    // LowCardinality(String) in the table, converted on insert, as region.
    credits_source: "String",
    refunded_credits: "Int64",
    refunded_at: "Int64",
    region: "String",
  },
  (event, region) => [
    event.requestId,
    wholeNumber(event.time),
    event.workspaceId,
    event.keySpaceId,
    event.identityId,
    event.externalId,
    event.keyId,
    event.creditsSource,
    wholeNumber(event.credits),
    wholeNumber(event.refundedAt),
    region,
  ],
);

export const RATELIMITS = eventTable<RatelimitEvent>(
  "ratelimits_v1",
  "rate limit events",
  {
    request_id: "String",
    time: "Int64",
    workspace_id: "String",
    namespace_id: "String",
    identifier: "String",
    passed: "Bool",
    latency: "Float64",
    override_id: "String",
    limit: "UInt64",
    remaining: "UInt64",
    reset_at: "Int64",
    tokens: "UInt64",
    region: "String",
  },
  (event, region) => [
    event.requestId,
    wholeNumber(event.time),
    event.workspaceId,
    event.namespaceId,
    event.identifier,
    event.passed,
    finite(event.latencyMs),
    event.overrideId,
    unsigned(event.limit),
    unsigned(event.remaining),
    wholeNumber(event.resetAt),
    unsigned(event.tokens),
    region,
  ],
);

export const GATEWAY_REQUESTS = eventTable<GatewayRequestEvent>(
  "gateway_requests_v1",
  "gateway request events",
  {
    request_id: "String",
    time: "Int64",
    workspace_id: "String",
    api_id: "String",
    app_id: "String",
    region: "String",
    method: "String",
    host: "String",
    path: "String",
    query_string: "String",
    request_headers: "Array(String)",
    response_status: "Int32",
    response_headers: "Array(String)",
    user_agent: "String",
    ip_address: "String",
    total_latency: "Float64",
    instance_latency: "Float64",
    gateway_latency: "Float64",
    key_id: "String",
    outcome: "String",
    request_body: "String",
    response_body: "String",
  },
  (event, region) => [
    event.requestId,
    wholeNumber(event.time),
    event.workspaceId,
    event.apiId,
    event.route,
    region,
    event.method,
    event.host,
    event.path,
    event.queryString,
    event.requestHeaders,
    int32(event.responseStatus),
    event.responseHeaders,
    event.userAgent,
    event.ipAddress,
    finite(event.totalLatencyMs),
    finite(event.upstreamLatencyMs),
    finite(event.gatewayLatencyMs),
    event.keyId,
    event.outcome,
    event.requestBody,
    event.responseBody,
  ],
);

/** The audit log: resources as two parallel arrays, the changed fields as one JSON array (never a secret). */
export const AUDIT_LOGS = eventTable<AuditEntry>(
  "audit_logs_v1",
  "audit log entries",
  {
    request_id: "String",
    time: "Int64",
    workspace_id: "String",
    audit_id: "String",
    actor_type: "String",
    actor_id: "String",
    actor_name: "String",
    action: "String",
    description: "String",
    resource_types: "Array(String)",
    resource_ids: "Array(String)",
    changes: "String",
    client_address: "String",
    user_agent: "String",
    region: "String",
  },
  (entry, region) => [
    entry.requestId,
    wholeNumber(entry.time),
    entry.workspaceId,
    entry.id,
    entry.actor.type,
    entry.actor.id,
    entry.actor.name,
    entry.action,
    entry.description,
    entry.resources.map((resource) => resource.type),
    entry.resources.map((resource) => resource.id),
    JSON.stringify(entry.changes),
    entry.clientAddress,
    entry.userAgent,
    region,
  ],
);

/** One row as an object, column for column (what a ClickHouse server gets as JSON). */
export function toRow<E>(table: EventTable<E>, event: E, region: string): Record<string, ColumnValue> {
  const values = table.values(event, region);
  const row: Record<string, ColumnValue> = {};
  for (const [index, column] of table.columns.entries()) row[column] = values[index] as ColumnValue;
  return row;
}

/** The structure of a RowBinary batch of `table`, for the engine's `file()` table function. */
export function rowStructure(table: EventTable<unknown>): string {
  return table.columns.map((column, index) => `\`${column}\` ${table.types[index]}`).join(", ");
}
