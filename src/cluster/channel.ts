import type { AnalyticsSinks } from "../domain/analytics/events.js";
import { AnalyticsEngineError } from "../domain/analytics/query-engine.js";
import type { AuditLogQuery } from "../domain/audit/audit-log-service.js";
import type { AuditEntry } from "../domain/audit/audit-trail.js";
import { defined } from "../lib/defined.js";

/** What a worker asks the primary, and the primary a worker. */
export type Question =
  | { kind: "sql"; connection: number; rows: boolean; sql: string; params?: Record<string, string> }
  | { kind: "release"; connection: number }
  | { kind: "analytics-check" }
  | { kind: "analytics-flush" }
  | { kind: "audit-admit" }
  | { kind: "audit-settled" }
  | { kind: "audit-list"; query: AuditLogQuery }
  | { kind: "metrics" }
  | { kind: "metrics-json" };

/** A worker's analytics events of one kind, handed to the primary's sink of that kind. */
export type EventsMessage = {
  [Kind in keyof AnalyticsSinks]: { keygate: "events"; kind: Kind; events: Parameters<AnalyticsSinks[Kind]["record"]>[0][] };
}[keyof AnalyticsSinks];

/** A worker's audit log entries, handed to the primary's audit log as soon as they are made. */
export type AuditMessage = { keygate: "events"; kind: "audit"; events: AuditEntry[] };

/** Every message between keygate's processes carries `keygate`, so other IPC traffic (prom-client's, say) passes by. */
export type Message =
  | { keygate: "ask"; id: number; question: Question }
  | { keygate: "answer"; id: number; ok: true; value: unknown }
  | { keygate: "answer"; id: number; ok: false; error: { message: string; engine?: { kind: "query" | "unavailable"; code?: number } } }
  | EventsMessage
  | AuditMessage
  | { keygate: "ready"; address: string }
  /** The primary asks a worker to close gracefully (its own signal, passed on by message: see WorkerPool.stop). */
  | { keygate: "close"; signal: string };

/**
 * Questions and answers over one IPC link (a worker and its primary): `ask` sends a question and resolves with its
 * answer; questions that arrive are answered by `answer`. An analytics engine error keeps its kind and code across.
 */
export class Channel {
  private readonly send: (message: Message) => void;
  private readonly answer: (question: Question) => Promise<unknown>;
  private readonly waiting = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  private nextId = 0;

  constructor(send: (message: Message) => void, answer: (question: Question) => Promise<unknown>) {
    this.send = send;
    this.answer = answer;
  }

  ask<T>(question: Question): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (value: unknown) => void, reject });
      try {
        this.send({ keygate: "ask", id, question });
      } catch (error) {
        this.waiting.delete(id);
        reject(error as Error);
      }
    });
  }

  /** Handles a message of this link; false for one that is not a question or an answer. */
  receive(message: Message): boolean {
    if (message.keygate === "ask") {
      this.answer(message.question).then(
        (value) => this.reply({ keygate: "answer", id: message.id, ok: true, value }),
        (error: unknown) => this.reply({ keygate: "answer", id: message.id, ok: false, error: describeError(error) }),
      );
      return true;
    }
    if (message.keygate !== "answer") return false;
    const waiter = this.waiting.get(message.id);
    if (!waiter) return true;
    this.waiting.delete(message.id);
    if (message.ok) waiter.resolve(message.value);
    else waiter.reject(toError(message.error));
    return true;
  }

  /** The other side is gone: every question waiting fails with `error`. */
  failAll(error: Error): void {
    for (const waiter of this.waiting.values()) waiter.reject(error);
    this.waiting.clear();
  }

  private reply(message: Message): void {
    try {
      this.send(message);
    } catch {
      // The asker is gone; no one waits for the answer.
    }
  }
}

/** Whether an IPC message is one of keygate's. */
export function isKeygateMessage(message: unknown): message is Message {
  return typeof message === "object" && message !== null && "keygate" in message;
}

function describeError(error: unknown): Extract<Message, { ok: false }>["error"] {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof AnalyticsEngineError) return { message, engine: { kind: error.kind, ...defined({ code: error.code }) } };
  return { message };
}

function toError(error: Extract<Message, { ok: false }>["error"]): Error {
  if (!error.engine) return new Error(error.message);
  return new AnalyticsEngineError(error.engine.kind, error.message, error.engine.code !== undefined ? { code: error.engine.code } : {});
}
