import { type AnalyticsRuntime, EMBEDDED_DATABASE } from "../analytics/index.js";
import type { VerificationEvent } from "../domain/analytics/events.js";
import type { AnalyticsConnection } from "../domain/analytics/query-engine.js";
import type { Channel, Message } from "./channel.js";

/** How long a worker gathers events before it hands them to the primary in one message. */
const HAND_OVER_MS = 20;
/** ... or how many, whichever comes first. */
const HAND_OVER_EVENTS = 2_000;

/**
 * The embedded analytics engine, seen from a worker: chDB runs in one process only (the primary), so a worker
 * hands its verification events over in batches and runs its analytics statements there, one connection per
 * analytics request as on a local engine. Its stats count what it recorded and what it has not handed over yet;
 * what is written (and dropped while writing) is counted in the primary.
 */
export function remoteAnalytics(channel: Channel, send: (message: Message, done: () => void) => void): AnalyticsRuntime {
  let pending: VerificationEvent[] = [];
  let timer: NodeJS.Timeout | undefined;
  let recorded = 0;
  let afterClose = 0;
  let closed = false;
  let nextConnection = 0;

  const handOver = (): Promise<void> => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (pending.length === 0) return Promise.resolve();
    const events = pending;
    pending = [];
    return new Promise((resolve) => send({ keygate: "events", events }, resolve));
  };

  const connection = (id: number): AnalyticsConnection => ({
    text: (sql, params) => channel.ask<string>({ kind: "sql", connection: id, rows: false, sql, ...(params ? { params } : {}) }),
    rows: (sql, params) =>
      channel.ask<Record<string, unknown>[]>({ kind: "sql", connection: id, rows: true, sql, ...(params ? { params } : {}) }),
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
      ratelimits: { record() {} },
      gatewayRequests: { record() {} },
      verifications: {
        record(event) {
          if (closed) {
            afterClose++;
            return;
          }
          recorded++;
          pending.push(event);
          if (pending.length >= HAND_OVER_EVENTS) void handOver();
          else timer ??= setTimeout(handOver, HAND_OVER_MS);
        },
      },
    },
    stats: () => ({
      recorded,
      written: 0,
      buffered: pending.length,
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
