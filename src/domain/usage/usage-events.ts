import { sha256Hex } from "../../lib/hash.js";
import type { PreparedEvent } from "../webhooks/dispatcher.js";
import type { UsageEventType } from "../webhooks/events.js";
import type { UsageNumbers } from "./usage-numbers.js";
import { subjectId, type UsageSubjectRef } from "./usage-queries.js";

/**
 * The usage events as sent: CloudEvents 1.0 in structured JSON (what OpenMeter ingests), each with an id derived
 * from what it reports, so that the same report made again (a retry after a crash, another instance, a replay) has
 * the same `id` and `webhook-id`, and a receiver that deduplicates on either bills a period once (docs/usage.md).
 */

/** The period a report covers: [start, end), unix ms. */
export interface ReportPeriod {
  granularity: "hourly" | "daily";
  start: number;
  end: number;
}

/** A subject as a report names it: the ids, and the meta a billing system finds its customer by. */
export interface ReportSubject {
  ref: UsageSubjectRef;
  meta?: Record<string, unknown>;
  /** A key's API, when the key is still known. */
  apiId?: string;
}

/** The id of the usage.reported event of `subject` in `period` for `endpointId`. */
export function reportId(endpointId: string, subject: UsageSubjectRef, period: ReportPeriod): string {
  return eventId("usage.reported", `${endpointId}|${subjectKey(subject)}|${period.start}|${period.end}`);
}

/** The id of a correction: the report's, and the numbers it corrects to (a later change is another correction). */
export function correctionId(reportedId: string, numbers: UsageNumbers): string {
  return eventId("usage.corrected", `${reportedId}|${JSON.stringify(numbers)}`);
}

function eventId(type: UsageEventType, text: string): string {
  return `usage_${sha256Hex(`${type}|${text}`).slice(0, 32)}`;
}

function subjectKey(subject: UsageSubjectRef): string {
  return `${subject.kind}:${subjectId(subject)}`;
}

/** The CloudEvents `subject`: the identity's externalId (the customer's id in the operator's system), or the key's id. */
function cloudSubject(subject: UsageSubjectRef): string {
  return subject.kind === "identity" ? subject.externalId : subject.keyId;
}

export function reportEvent(
  workspaceId: string,
  endpointId: string,
  subject: ReportSubject,
  period: ReportPeriod,
  numbers: UsageNumbers,
): PreparedEvent {
  const id = reportId(endpointId, subject.ref, period);
  return cloudEvent("usage.reported", id, workspaceId, subject, period, {
    ...baseData(workspaceId, endpointId, subject, period),
    ...numbers,
  });
}

/**
 * A report's correction: the numbers now (the whole period, as a report has them), what was reported before, and
 * the change between them (what an additive meter adds).
 */
export function correctionEvent(
  workspaceId: string,
  endpointId: string,
  subject: ReportSubject,
  period: ReportPeriod,
  numbers: UsageNumbers,
  previous: UsageNumbers,
  change: UsageNumbers,
): PreparedEvent {
  const corrects = reportId(endpointId, subject.ref, period);
  const id = correctionId(corrects, numbers);
  return cloudEvent("usage.corrected", id, workspaceId, subject, period, {
    ...baseData(workspaceId, endpointId, subject, period),
    corrects,
    ...numbers,
    previous,
    change,
  });
}

function baseData(workspaceId: string, endpointId: string, subject: ReportSubject, period: ReportPeriod): Record<string, unknown> {
  const data: Record<string, unknown> = { workspaceId, webhookId: endpointId, period: { ...period } };
  const { ref } = subject;
  if (ref.kind === "identity") {
    const identity: Record<string, unknown> = { id: ref.identityId, externalId: ref.externalId };
    if (subject.meta !== undefined) identity.meta = subject.meta;
    data.identity = identity;
  } else {
    const key: Record<string, unknown> = { id: ref.keyId };
    if (subject.apiId !== undefined) key.apiId = subject.apiId;
    if (subject.meta !== undefined) key.meta = subject.meta;
    data.key = key;
  }
  return data;
}

function cloudEvent(
  type: UsageEventType,
  id: string,
  workspaceId: string,
  subject: ReportSubject,
  period: ReportPeriod,
  data: Record<string, unknown>,
): PreparedEvent {
  const payload = JSON.stringify({
    specversion: "1.0",
    id,
    source: `keygate/${workspaceId}`,
    type,
    subject: cloudSubject(subject.ref),
    // The period's start: a billing system files the usage under the period it happened in.
    time: new Date(period.start).toISOString(),
    datacontenttype: "application/json",
    data,
  });
  return { id, type, payload };
}
