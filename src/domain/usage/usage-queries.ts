import type { AnalyticsQueryEngine } from "../analytics/query-engine.js";
import type { UsageGranularity } from "./periods.js";
import { addRow, emptyUsage, subtractRefund, type UsageNumbers } from "./usage-numbers.js";

/**
 * The usage questions keygate asks analytics itself, over the raw verification table: every verification is one
 * row there (nothing sampled, nothing merged), and the row says which balance paid its credits. Credits given back
 * (credit_refunds_v1, one row per refund under the verification's request id and time) are subtracted in the same
 * bucket, and only those of a verification the table holds: a refund never takes off what was not counted. The SQL
 * is keygate's own; the ids filtered on are bound as parameters, never written into the text.
 */

/** What a usage question is confined to: always a workspace, and within it any of an API's key space, an identity, a key. */
export interface UsageFilter {
  workspaceId: string;
  keySpaceId?: string;
  identityId?: string;
  keyId?: string;
}

/** Usage of one subject (an identity, or a key without one) in one hour. */
export interface SubjectHour {
  subject: UsageSubjectRef;
  hour: number;
  numbers: UsageNumbers;
}

/** Who usage is reported for: an identity with all its keys, or a key that has no identity. */
export type UsageSubjectRef =
  | { kind: "identity"; identityId: string; externalId: string }
  | { kind: "key"; keyId: string; keySpaceId: string };

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/** The bucket a row falls in: unix ms for hours and days; YYYYMM for calendar months (turned into ms below). */
const BUCKET: Record<UsageGranularity, string> = {
  hourly: `intDiv(time, ${HOUR_MS}) * ${HOUR_MS}`,
  daily: `intDiv(time, ${DAY_MS}) * ${DAY_MS}`,
  monthly: "toYYYYMM(toDateTime(intDiv(time, 1000), 'UTC'))",
};

function bucketStart(granularity: UsageGranularity, value: unknown): number {
  const n = Number(value);
  return granularity === "monthly" ? Date.UTC(Math.floor(n / 100), (n % 100) - 1, 1) : n;
}

export class UsageQueries {
  private readonly engine: AnalyticsQueryEngine;

  constructor(engine: AnalyticsQueryEngine) {
    this.engine = engine;
  }

  /** Usage within `filter` in [start, end), by bucket start; buckets without usage are absent. */
  async buckets(filter: UsageFilter, granularity: UsageGranularity, start: number, end: number): Promise<Map<number, UsageNumbers>> {
    const { conditions, params } = where(filter, start, end);
    const [rows, refunds] = await this.engine.withConnection(async (connection) => [
      await connection.rows(
        `SELECT ${BUCKET[granularity]} AS bucket, outcome, credits_source, count() AS requests, sum(spent_credits) AS credits ` +
          `FROM key_verifications_v1 WHERE ${conditions} GROUP BY bucket, outcome, credits_source`,
        params,
      ),
      await connection.rows(
        `SELECT ${BUCKET[granularity]} AS bucket, credits_source, sum(refunded_credits) AS credits ` +
          `FROM credit_refunds_v1 WHERE ${refunded(conditions)} GROUP BY bucket, credits_source`,
        params,
      ),
    ]);
    const buckets = new Map<number, UsageNumbers>();
    const bucketOf = (row: Record<string, unknown>) => {
      const at = bucketStart(granularity, row.bucket);
      let numbers = buckets.get(at);
      if (!numbers) {
        numbers = emptyUsage();
        buckets.set(at, numbers);
      }
      return numbers;
    };
    for (const row of rows) addRow(bucketOf(row), usageRow(row));
    for (const row of refunds) subtractRefund(bucketOf(row), refundRow(row));
    return buckets;
  }

  /**
   * The workspace's usage in [start, end) by subject and hour: each identity's keys together, each key without an
   * identity on its own. Verifications of no key (NOT_FOUND) belong to no subject and are left out.
   */
  async bySubjectAndHour(workspaceId: string, start: number, end: number): Promise<SubjectHour[]> {
    const { conditions, params } = where({ workspaceId }, start, end);
    const subjectColumns =
      "identity_id, if(identity_id = '', key_id, '') AS lone_key_id, any(external_id) AS external_id, " +
      `any(key_space_id) AS key_space_id, ${BUCKET.hourly} AS hour`;
    const [rows, refunds] = await this.engine.withConnection(async (connection) => [
      await connection.rows(
        `SELECT ${subjectColumns}, outcome, credits_source, count() AS requests, sum(spent_credits) AS credits ` +
          `FROM key_verifications_v1 WHERE ${conditions} AND key_id != '' ` +
          "GROUP BY identity_id, lone_key_id, hour, outcome, credits_source ORDER BY hour, identity_id, lone_key_id",
        params,
      ),
      await connection.rows(
        `SELECT ${subjectColumns}, credits_source, sum(refunded_credits) AS credits ` +
          `FROM credit_refunds_v1 WHERE ${refunded(conditions)} AND key_id != '' ` +
          "GROUP BY identity_id, lone_key_id, hour, credits_source",
        params,
      ),
    ]);
    const found = new Map<string, SubjectHour>();
    const entryOf = (row: Record<string, unknown>) => {
      const identityId = String(row.identity_id);
      const subject: UsageSubjectRef =
        identityId !== ""
          ? { kind: "identity", identityId, externalId: String(row.external_id) }
          : { kind: "key", keyId: String(row.lone_key_id), keySpaceId: String(row.key_space_id) };
      const hour = Number(row.hour);
      const name = `${hour}:${subjectId(subject)}`;
      let entry = found.get(name);
      if (!entry) {
        entry = { subject, hour, numbers: emptyUsage() };
        found.set(name, entry);
      }
      return entry;
    };
    for (const row of rows) addRow(entryOf(row).numbers, usageRow(row));
    for (const row of refunds) subtractRefund(entryOf(row).numbers, refundRow(row));
    return [...found.values()];
  }
}

/** A subject's id: its identity's, or its key's. */
export function subjectId(subject: UsageSubjectRef): string {
  return subject.kind === "identity" ? subject.identityId : subject.keyId;
}

function where(filter: UsageFilter, start: number, end: number): { conditions: string; params: Record<string, string> } {
  const params: Record<string, string> = { workspace: filter.workspaceId };
  const conditions = ["workspace_id = {workspace:String}", `time >= ${wholeMs(start)}`, `time < ${wholeMs(end)}`];
  if (filter.keySpaceId !== undefined) {
    conditions.push("key_space_id = {keySpace:String}");
    params.keySpace = filter.keySpaceId;
  }
  if (filter.identityId !== undefined) {
    conditions.push("identity_id = {identity:String}");
    params.identity = filter.identityId;
  }
  if (filter.keyId !== undefined) {
    conditions.push("key_id = {key:String}");
    params.key = filter.keyId;
  }
  return { conditions: conditions.join(" AND "), params };
}

/**
 * The refunds within `conditions` (the same columns and bounds as the verifications': a refund row carries its
 * verification's time) whose verification is in the table: a refund whose verification never reached it (lost
 * before a flush) would otherwise take off credits usage never counted.
 */
function refunded(conditions: string): string {
  return `${conditions} AND request_id IN (SELECT request_id FROM key_verifications_v1 WHERE ${conditions} AND spent_credits > 0)`;
}

function wholeMs(value: number): string {
  if (!Number.isSafeInteger(value)) throw new Error(`refusing to put ${value} into a usage query`);
  return String(value);
}

function usageRow(row: Record<string, unknown>) {
  return {
    outcome: String(row.outcome),
    creditsSource: String(row.credits_source),
    requests: Number(row.requests),
    credits: Number(row.credits),
  };
}

function refundRow(row: Record<string, unknown>) {
  return { creditsSource: String(row.credits_source), credits: Number(row.credits) };
}
