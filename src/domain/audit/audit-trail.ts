import { randomBytes } from "node:crypto";
import type { Clock } from "../../lib/clock.js";
import type { Caller } from "../caller.js";

/**
 * The audit log's port: every management write is recorded where it is made, in the domain service that knows the
 * old and new values, through the AuditTrail it gets from its constructor. An entry never holds a key, a root key
 * or any other secret, not even hashed: a secret-bearing field is left out of `changes`.
 */

/** Every action an entry may name (docs/audit-log.md lists them; Unkey's event names where Unkey has one). */
export const AUDIT_ACTIONS = [
  "api.create",
  "api.update",
  "api.delete",
  "key.create",
  "key.update",
  "key.delete",
  "key.reroll",
  "key.reveal",
  "authorization.connect_permission_and_key",
  "authorization.disconnect_permission_and_key",
  "authorization.connect_role_and_key",
  "authorization.disconnect_role_and_key",
  "permission.create",
  "permission.delete",
  "role.create",
  "role.update",
  "role.delete",
  "identity.create",
  "identity.update",
  "identity.delete",
  "ratelimit.set_override",
  "ratelimit.delete_override",
  "rootKey.create",
  "rootKey.delete",
  "route.create",
  "route.update",
  "route.delete",
  "route.set_policies",
  "route.update_policy",
  "route.set_openapi",
  "portal.create",
  "portal.update",
  "portal.delete",
  "portal.create_session",
  "portal.exchange_code",
  "portal.sign_out",
  "webhook.create",
  "webhook.update",
  "webhook.delete",
  "webhook.rotate_secret",
  "webhook.test",
  "webhook.replay_usage_reports",
  "dashboard.sign_in",
  "dashboard.sign_in_failed",
  "dashboard.sign_out",
  "config.reload",
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export type AuditActorType = "root_key" | "dashboard" | "portal" | "system";

export interface AuditActor {
  type: AuditActorType;
  /** The root key's id (also for a dashboard session), a portal session's external id, or `keygate` for the system. */
  id: string;
  /** The root key's name; "" when it has none. */
  name: string;
}

/** A resource a write touched: `key`, `api`, `identity`, `permission`, `role`, `ratelimitNamespace`, … and its id. */
export interface AuditResource {
  type: string;
  id: string;
}

/** One field a write changed, by its wire name; null stands for "not set" on either side. */
export interface AuditChange {
  field: string;
  old: unknown;
  new: unknown;
}

export interface AuditEntry {
  /** `audit_…`, unique; with `time` the order of the log. */
  id: string;
  /** Unix ms. */
  time: number;
  workspaceId: string;
  actor: AuditActor;
  action: AuditAction;
  description: string;
  resources: AuditResource[];
  changes: AuditChange[];
  /** "" where the write had no request (the system's). */
  requestId: string;
  clientAddress: string;
  userAgent: string;
}

/** What a service says of a write it made. */
export interface AuditEvent {
  action: AuditAction;
  description: string;
  resources: AuditResource[];
  changes?: AuditChange[];
}

/**
 * Where entries go (an outbox the analytics engine is fed from, or memory with analytics off). record() never drops
 * an entry it is given; admit() is asked before a write and waits for room or throws, so a write never succeeds
 * unrecorded; settled() is asked before the write is answered, so an answered write's entry survives a crash
 * (docs/audit-log.md#what-survives-what).
 */
export interface AuditSink {
  record(entry: AuditEntry): void;
  admit(): Promise<void>;
  /**
   * Resolves once every entry recorded so far is durable (as durable as this sink can make it); rejects with 503
   * audit_log_unavailable when that cannot be done now (the entries are kept and tried again).
   */
  settled(): Promise<void>;
}

export interface AuditTrail {
  /** Asked before a write: resolves once its entry can be kept, throws 503 audit_log_unavailable otherwise. */
  admit(): Promise<void>;
  /** Asked before a write is answered: resolves once every entry recorded so far is durable (see AuditSink). */
  settled(): Promise<void>;
  /** One entry for a write `caller` made (called once the write is done). */
  record(caller: Caller, event: AuditEvent): void;
  /** One entry for what keygate did by itself (configuration reloads, the bootstrap root key). */
  recordSystem(workspaceId: string, event: AuditEvent): void;
  /** One entry for an actor that is not an authenticated caller (a failed dashboard sign-in). */
  recordAs(workspaceId: string, actor: AuditActor, context: EntryContext, event: AuditEvent): void;
}

export interface EntryContext {
  requestId: string;
  clientAddress: string;
  userAgent: string;
}

export const NO_CONTEXT: EntryContext = { requestId: "", clientAddress: "", userAgent: "" };
export const SYSTEM_ACTOR: AuditActor = { type: "system", id: "keygate", name: "" };

export class SinkAuditTrail implements AuditTrail {
  private readonly sink: AuditSink;
  private readonly clock: Clock;

  constructor(sink: AuditSink, clock: Clock) {
    this.sink = sink;
    this.clock = clock;
  }

  admit(): Promise<void> {
    return this.sink.admit();
  }

  settled(): Promise<void> {
    return this.sink.settled();
  }

  record(caller: Caller, event: AuditEvent): void {
    const actor: AuditActor = {
      type: caller.context?.actorType ?? "root_key",
      id: caller.actorId ?? caller.rootKeyId,
      name: caller.rootKeyName,
    };
    this.recordAs(caller.workspaceId, actor, caller.context ?? NO_CONTEXT, event);
  }

  recordSystem(workspaceId: string, event: AuditEvent): void {
    this.recordAs(workspaceId, SYSTEM_ACTOR, NO_CONTEXT, event);
  }

  recordAs(workspaceId: string, actor: AuditActor, context: EntryContext, event: AuditEvent): void {
    const time = this.clock.now();
    this.sink.record({
      id: auditId(time),
      time,
      workspaceId,
      actor,
      action: event.action,
      description: event.description,
      resources: event.resources,
      changes: event.changes ?? [],
      requestId: context.requestId,
      clientAddress: context.clientAddress,
      userAgent: context.userAgent,
    });
  }
}

let sequence = 0;

/**
 * `audit_<time><sequence><random>` in fixed-width hex: ids sort as their entries were made (within one process, also
 * several in one millisecond), which keeps "newest first" and the cursor exact; the random part keeps processes apart.
 */
export function auditId(time: number): string {
  sequence = (sequence + 1) % 0x10000;
  const hex = (value: number, width: number) => value.toString(16).padStart(width, "0");
  return `audit_${hex(Math.max(0, Math.trunc(time)), 12)}${hex(sequence, 4)}${randomBytes(4).toString("hex")}`;
}

/** For services built without a trail (tests of one service); services.ts always gives a real one. */
export const UNAUDITED: AuditTrail = {
  admit: async () => {},
  settled: async () => {},
  record: () => {},
  recordSystem: () => {},
  recordAs: () => {},
};

/**
 * The fields among `fields` whose values differ between `before` and `after` (compared as JSON), absent ones as
 * null. A field that holds a secret must never be listed.
 */
export function changesOf(
  before: Readonly<Record<string, unknown>>,
  after: Readonly<Record<string, unknown>>,
  fields: readonly string[],
): AuditChange[] {
  const changes: AuditChange[] = [];
  for (const field of fields) {
    const old = before[field] ?? null;
    const now = after[field] ?? null;
    if (JSON.stringify(old) !== JSON.stringify(now)) changes.push({ field, old, new: now });
  }
  return changes;
}

/** The fields of something created, each from null. */
export function created(values: Readonly<Record<string, unknown>>): AuditChange[] {
  return changesOf({}, values, Object.keys(values));
}

/** The fields of something removed, each to null. */
export function removed(values: Readonly<Record<string, unknown>>): AuditChange[] {
  return changesOf(values, {}, Object.keys(values));
}
