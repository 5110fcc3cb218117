import { invalidAt, KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import type { IdentityStore, KeyStore } from "../../storage/interfaces.js";
import type { UsageReportStore } from "../../storage/usage-report-interfaces.js";
import type { WebhookStore } from "../../storage/webhook-interfaces.js";
import type { WebhookEndpointRecord } from "../../storage/webhook-records.js";
import type { AnalyticsQueryEngine } from "../analytics/query-engine.js";
import { DAY_MS } from "../analytics/tables.js";
import { type AuditTrail, UNAUDITED } from "../audit/audit-trail.js";
import type { Caller } from "../caller.js";
import { requireWebhook } from "../root-keys/permissions.js";
import type { PreparedEvent } from "../webhooks/dispatcher.js";
import { periodCount, periodEnd, periodStart, periodStarts } from "./periods.js";
import { correctionEvent, type ReportPeriod, type ReportSubject, reportEvent } from "./usage-events.js";
import { addUsage, emptyUsage, sameUsage, type UsageNumbers, usageDifference } from "./usage-numbers.js";
import { type SubjectHour, subjectId, UsageQueries, type UsageSubjectRef } from "./usage-queries.js";
import { analyticsOff, engineFailure } from "./usage-service.js";

export interface UsageReporterSettings {
  /**
   * How long after a period ends its report is made: the analytics buffer's flush interval, plus a margin for a
   * batch that needs a retry or two (docs/usage.md#delay).
   */
  delayMs: number;
  /** How long the producer's lease lasts; renewed before each period. */
  leaseMs: number;
  /** How far back, before the period being reported, a changed period is corrected (0: never). */
  correctionWindowMs: number;
  /** Periods one endpoint moves on by in one pass, at most (a backlog is worked off over several). */
  maxPeriodsPerPass: number;
  /** How long the raw verification table keeps rows (analytics.retentionDays.raw): replays reach no further back. */
  rawRetentionDays: number;
}

export interface UsageReporterDeps {
  /** undefined when analytics is off: nothing is produced, and replays answer 412. */
  engine: AnalyticsQueryEngine | undefined;
  webhooks: WebhookStore;
  identities: IdentityStore;
  keys: KeyStore;
  progress: UsageReportStore;
  /** Where the events go: the dispatcher's one-endpoint path into the outbox. */
  outbox: { enqueuePrepared(endpoint: WebhookEndpointRecord, events: readonly PreparedEvent[]): Promise<void> };
  clock: Clock;
  /** This instance's name as the lease holder. */
  owner: string;
  settings: UsageReporterSettings;
  /** Where replays record their entry. */
  audit?: AuditTrail;
  /** Told of an endpoint whose reports failed this pass (they are made on a later one). */
  onError?: (error: unknown, endpoint: WebhookEndpointRecord) => void;
}

/** Periods one replay covers, at most (31 days of hours). */
export const MAX_REPLAY_PERIODS = 744;

/** The marker kept with every period reported: a period without it was not reported under this start. */
const PERIOD_END = "~end";

/**
 * Usage reports (docs/usage.md): for every enabled endpoint subscribed to usage.reported, each closed period's usage
 * by subject, produced once the analytics pipeline has written it, by one instance at a time.
 *
 * A period is done once its events are in the outbox: they are enqueued first and the endpoint's progress is then
 * moved past the period, in one step with the lease check. A producer that dies in between leaves the progress where
 * it was, so the next one makes the same events again, with the same ids; none is lost, and a repeat is recognisable
 * by its `webhook-id`. A producer that lost its lease cannot move the progress, and stops.
 */
export class UsageReporter {
  private readonly deps: UsageReporterDeps;
  private readonly queries: UsageQueries | undefined;
  private readonly audit: AuditTrail;

  constructor(deps: UsageReporterDeps) {
    this.deps = deps;
    this.queries = deps.engine && new UsageQueries(deps.engine);
    this.audit = deps.audit ?? UNAUDITED;
  }

  /** One pass, when this instance holds (or takes) the lease. Resolves with the events enqueued. */
  async produce(): Promise<{ reports: number; corrections: number }> {
    const produced = { reports: 0, corrections: 0 };
    if (!this.queries || !(await this.holdLease())) return produced;
    for (const workspaceId of await this.deps.webhooks.workspaces()) {
      for (const endpoint of await this.deps.webhooks.list(workspaceId)) {
        if (!endpoint.enabled || !endpoint.events.includes("usage.reported")) continue;
        try {
          const made = await this.produceFor(this.queries, endpoint);
          produced.reports += made.reports;
          produced.corrections += made.corrections;
          if (made.leaseLost) return produced;
        } catch (error) {
          this.deps.onError?.(error, endpoint);
        }
      }
    }
    return produced;
  }

  /** This instance's name as the lease holder. */
  get owner(): string {
    return this.deps.owner;
  }

  /** Gives the lease up (this instance stops): another takes over at once rather than when it would have run out. */
  release(): Promise<void> {
    return this.deps.progress.release(this.deps.owner);
  }

  /**
   * keygate.replayUsageReports: the endpoint's usage.reported events of the closed periods in [start, end) again,
   * with the numbers analytics holds now and the ids they were first sent with.
   */
  async replay(caller: Caller, input: { webhookId: string; start: number; end: number }): Promise<{ periods: number; reports: number }> {
    caller.authorize(requireWebhook("update_webhook", input.webhookId));
    const endpoint = await this.deps.webhooks.get(caller.workspaceId, input.webhookId);
    if (!endpoint) throw new KeygateError("err:keygate:data:webhook_not_found", `The webhook '${input.webhookId}' does not exist.`);
    if (!this.queries) throw analyticsOff();
    if (!endpoint.events.includes("usage.reported"))
      throw invalidAt("body.webhookId", "does not subscribe to usage.reported", "add usage.reported to its events first");
    const granularity = endpoint.usagePeriod ?? "hourly";
    const now = this.deps.clock.now();
    if (input.end <= input.start) throw invalidAt("body.end", "must be greater than start");
    const first = periodStart(granularity, input.start);
    const last = periodEnd(granularity, input.end - 1);
    if (last + this.deps.settings.delayMs > now)
      throw invalidAt("body.end", `reaches a ${granularity} period that has not closed and been written yet`, "replay closed periods only");
    const count = periodCount(granularity, first, last);
    if (count > MAX_REPLAY_PERIODS)
      throw invalidAt("body.start", `asks for ${count} periods; at most ${MAX_REPLAY_PERIODS} are replayed at once`);
    // The same bound as getUsage: rows past the raw table's retention are gone, so a replay there would be wrong.
    const cutoff = now - this.deps.settings.rawRetentionDays * DAY_MS;
    if (first < cutoff)
      throw invalidAt(
        "body.start",
        `is before ${new Date(cutoff).toISOString()}: verifications are kept ${this.deps.settings.rawRetentionDays} days (analytics.retentionDays.raw)`,
      );
    const periods = periodStarts(granularity, first, last).map(
      (at): ReportPeriod => ({ granularity, start: at, end: periodEnd(granularity, at) }),
    );
    const hours = await this.queries.bySubjectAndHour(endpoint.workspaceId, first, last).catch((error: unknown) => {
      throw engineFailure(error);
    });
    const events: PreparedEvent[] = [];
    for (const period of periods) {
      for (const [subject, numbers] of await this.subjectsOf(endpoint.workspaceId, hours, period)) {
        events.push(reportEvent(endpoint.workspaceId, endpoint.id, subject, period, numbers));
      }
    }
    if (events.length > 0) await this.deps.outbox.enqueuePrepared(endpoint, events);
    this.audit.record(caller, {
      action: "webhook.replay_usage_reports",
      description: `Replayed ${events.length} usage reports of ${periods.length} ${granularity} periods to webhook ${endpoint.id}`,
      resources: [{ type: "webhook", id: endpoint.id }],
      changes: [],
    });
    return { periods: periods.length, reports: events.length };
  }

  private holdLease(): Promise<boolean> {
    return this.deps.progress.lease(this.deps.owner, this.deps.clock.now(), this.deps.settings.leaseMs);
  }

  /** The endpoint's due periods, oldest first, each enqueued and then committed; stops at the first not yet due. */
  private async produceFor(
    queries: UsageQueries,
    endpoint: WebhookEndpointRecord,
  ): Promise<{ reports: number; corrections: number; leaseLost?: true }> {
    const made = { reports: 0, corrections: 0 };
    const { settings, progress, clock } = this.deps;
    const granularity = endpoint.usagePeriod ?? "hourly";
    const floor = periodStart(granularity, endpoint.usageReportsFrom ?? endpoint.createdAt);
    const corrects = endpoint.events.includes("usage.corrected") && settings.correctionWindowMs > 0;
    for (let n = 0; n < settings.maxPeriodsPerPass; n++) {
      const reached = await progress.progress(endpoint.id);
      // Subscribed again after a pause: the periods in between were not subscribed to.
      const start = reached === null || reached < floor ? floor : reached;
      // After a change of granularity the first period runs from where the last one ended to the next boundary.
      const period: ReportPeriod = { granularity, start, end: periodEnd(granularity, start) };
      if (period.end + settings.delayMs > clock.now()) break;
      if (!(await this.holdLease())) return { ...made, leaseLost: true };

      const earlier = corrects && reached !== null ? await this.reportedPeriods(endpoint.id, granularity, start) : [];
      const from = earlier[0]?.period.start ?? start;
      const hours = await queries.bySubjectAndHour(endpoint.workspaceId, from, period.end);
      const events: PreparedEvent[] = [];
      const reported: { periodStart: number; subjects: Record<string, string> }[] = [];

      const current: Record<string, string> = { [PERIOD_END]: String(period.end) };
      for (const [subject, numbers] of await this.subjectsOf(endpoint.workspaceId, hours, period)) {
        events.push(reportEvent(endpoint.workspaceId, endpoint.id, subject, period, numbers));
        current[subjectId(subject.ref)] = JSON.stringify(numbers);
      }
      made.reports += events.length;
      reported.push({ periodStart: period.start, subjects: current });

      for (const { period: before, kept } of earlier) {
        const changed: Record<string, string> = {};
        for (const [subject, numbers] of await this.subjectsOf(endpoint.workspaceId, hours, before)) {
          const id = subjectId(subject.ref);
          const previous = kept[id] === undefined ? emptyUsage() : (JSON.parse(kept[id]) as UsageNumbers);
          if (sameUsage(previous, numbers)) continue;
          events.push(
            correctionEvent(endpoint.workspaceId, endpoint.id, subject, before, numbers, previous, usageDifference(numbers, previous)),
          );
          changed[id] = JSON.stringify(numbers);
          made.corrections += 1;
        }
        if (Object.keys(changed).length > 0) reported.push({ periodStart: before.start, subjects: changed });
      }

      // The events first: a period is done only once they are in the outbox.
      if (events.length > 0) await this.deps.outbox.enqueuePrepared(endpoint, events);
      const committed = await progress.commit({
        owner: this.deps.owner,
        now: clock.now(),
        endpointId: endpoint.id,
        from: reached,
        to: period.end,
        reported,
        keepMs: settings.correctionWindowMs + settings.leaseMs + DAY_MS,
      });
      if (!committed) return { ...made, leaseLost: true };
    }
    return made;
  }

  /** The periods reported before `start` within the correction window, oldest first, with what each reported. */
  private async reportedPeriods(
    endpointId: string,
    granularity: "hourly" | "daily",
    start: number,
  ): Promise<{ period: ReportPeriod; kept: Record<string, string> }[]> {
    const found: { period: ReportPeriod; kept: Record<string, string> }[] = [];
    const oldest = start - this.deps.settings.correctionWindowMs;
    for (let end = start; end > oldest; ) {
      const periodStartAt = periodStart(granularity, end - 1);
      if (periodStartAt < oldest) break;
      const kept = await this.deps.progress.reported(endpointId, periodStartAt);
      // Only a period reported under this start and end: one produced before a change of granularity is skipped.
      if (kept[PERIOD_END] === String(end)) found.unshift({ period: { granularity, start: periodStartAt, end }, kept });
      end = periodStartAt;
    }
    return found;
  }

  /** Each subject's usage within `period`, from the hourly rows, with its meta; subjects sorted by id. */
  private async subjectsOf(
    workspaceId: string,
    hours: readonly SubjectHour[],
    period: ReportPeriod,
  ): Promise<[ReportSubject, UsageNumbers][]> {
    const bySubject = new Map<string, { ref: UsageSubjectRef; numbers: UsageNumbers }>();
    for (const row of hours) {
      if (row.hour < period.start || row.hour >= period.end) continue;
      const id = subjectId(row.subject);
      let entry = bySubject.get(id);
      if (!entry) {
        entry = { ref: row.subject, numbers: emptyUsage() };
        bySubject.set(id, entry);
      }
      addUsage(entry.numbers, row.numbers);
    }
    const sorted = [...bySubject.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, entry]) => entry);
    const identityIds = sorted.flatMap((entry) => (entry.ref.kind === "identity" ? [entry.ref.identityId] : []));
    const identities = new Map((await this.deps.identities.getMany(workspaceId, identityIds)).map((identity) => [identity.id, identity]));
    const subjects: [ReportSubject, UsageNumbers][] = [];
    for (const { ref, numbers } of sorted) {
      const subject: ReportSubject = { ref };
      if (ref.kind === "identity") {
        const meta = identities.get(ref.identityId)?.meta;
        if (meta !== undefined) subject.meta = meta;
      } else {
        const key = await this.deps.keys.get(workspaceId, ref.keyId);
        if (key) {
          subject.apiId = key.apiId;
          if (key.meta !== undefined) subject.meta = key.meta;
        }
      }
      subjects.push([subject, numbers]);
    }
    return subjects;
  }
}
