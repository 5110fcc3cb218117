import { type AuditLog, auditLogUnavailable } from "../analytics/audit-log.js";
import { type AnalyticsRuntime, EMBEDDED_DATABASE } from "../analytics/index.js";
import type { AnalyticsSinks, EventSink } from "../domain/analytics/events.js";
import type { AnalyticsConnection } from "../domain/analytics/query-engine.js";
import type { AuditEntry } from "../domain/audit/audit-trail.js";
import { defined } from "../lib/defined.js";
import type { AuditMessage, Channel, EventsMessage, Message } from "./channel.js";

/** How long a worker gathers events before it hands them to the primary in one message. */
const HAND_OVER_MS = 20;
/** ... or how many, whichever comes first. */
const HAND_OVER_EVENTS = 2_000;

/**
 * The embedded analytics engine, seen from a worker: chDB runs in one process only (the primary), so a worker
 * hands its events over in batches (one message per kind) and runs its analytics statements there, one connection per
 * analytics request as on a local engine. Its stats count what it recorded and what it has not handed over yet;
 * what is written (and dropped while writing) is counted in the primary.
 */
export function remoteAnalytics(channel: Channel, send: (message: Message, done: () => void) => void): AnalyticsRuntime {
  let pending = new Map<keyof AnalyticsSinks, unknown[]>();
  let pendingEvents = 0;
  let timer: NodeJS.Timeout | undefined;
  let recorded = 0;
  let afterClose = 0;
  let closed = false;
  let nextConnection = 0;

  const handOver = (): Promise<void> => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    const gathered = [...pending];
    pending = new Map();
    pendingEvents = 0;
    const sent = gathered.map(
      ([kind, events]) => new Promise<void>((resolve) => send({ keygate: "events", kind, events } as EventsMessage, resolve)),
    );
    return Promise.all(sent).then(() => {});
  };

  /** A sink that gathers events of `kind` into the next hand-over. */
  const sinkOf = (kind: keyof AnalyticsSinks) => ({
    record(event: unknown) {
      if (closed) {
        afterClose++;
        return;
      }
      recorded++;
      const events = pending.get(kind) ?? [];
      pending.set(kind, events);
      events.push(event);
      pendingEvents++;
      if (pendingEvents >= HAND_OVER_EVENTS) void handOver();
      else timer ??= setTimeout(handOver, HAND_OVER_MS);
    },
  });

  const connection = (id: number): AnalyticsConnection => ({
    text: (sql, params) => channel.ask<string>({ kind: "sql", connection: id, rows: false, sql, ...defined({ params }) }),
    rows: (sql, params) => channel.ask<Record<string, unknown>[]>({ kind: "sql", connection: id, rows: true, sql, ...defined({ params }) }),
  });

  return {
    mode: "embedded",
    engine: {
      database: EMBEDDED_DATABASE,
      withConnection: async (work) => {
        const id = nextConnection++;
        try {
          return await work(connection(id));
        } finally {
          await channel.ask({ kind: "release", connection: id }).catch(() => {});
        }
      },
    },
    sinks: {
      verifications: sinkOf("verifications"),
      ratelimits: sinkOf("ratelimits"),
      gatewayRequests: sinkOf("gatewayRequests"),
      creditRefunds: sinkOf("creditRefunds"),
    },
    audit: remoteAuditLog(channel, send),
    stats: () => ({
      recorded,
      written: 0,
      buffered: pendingEvents,
      dropped: { bufferFull: 0, writeFailed: 0, afterClose, disabled: 0 },
      batchesWritten: 0,
      failedWrites: 0,
    }),
    flush: async () => {
      await handOver();
      await channel.ask({ kind: "analytics-flush" });
    },
    check: () => channel.ask({ kind: "analytics-check" }),
    describe: () => "analytics: embedded ClickHouse (chDB) in the primary process; this worker hands its events over",
    close: async () => {
      closed = true;
      await handOver();
    },
  };
}

/**
 * A worker's audit log: each entry goes to the primary at once (IPC keeps the order, so a listing asked for after a
 * write finds it), and admit() and listings are the primary's.
 */
function remoteAuditLog(channel: Channel, send: (message: Message, done: () => void) => void): AuditLog {
  return {
    record: (entry: AuditEntry) => send({ keygate: "events", kind: "audit", events: [entry] } satisfies AuditMessage, () => {}),
    admit: () =>
      channel.ask<void>({ kind: "audit-admit" }).catch(() => {
        throw auditLogUnavailable();
      }),
    list: (query) => channel.ask<AuditEntry[]>({ kind: "audit-list", query }),
    describe: () => "audit log: audit_logs_v1, written by the primary",
  };
}

/** The primary's side of a hand-over: a worker's events go to the primary's sink of their kind. */
export function recordHandedOver(analytics: Pick<AnalyticsRuntime, "sinks" | "audit">, message: EventsMessage | AuditMessage): void {
  if (message.kind === "audit") {
    for (const entry of message.events) analytics.audit.record(entry);
    return;
  }
  const sinks: AnalyticsSinks = analytics.sinks;
  const sink = sinks[message.kind] as EventSink<(typeof message.events)[number]>;
  for (const event of message.events) sink.record(event);
}
