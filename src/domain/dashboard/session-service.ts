import { randomBytes, timingSafeEqual } from "node:crypto";
import { KeygateError } from "../../errors/keygate-error.js";
import { base58Encode } from "../../lib/base58.js";
import type { Clock } from "../../lib/clock.js";
import { hashKey } from "../../lib/hash.js";
import type { DashboardSessionStore } from "../../storage/interfaces.js";
import type { DashboardSessionRecord } from "../../storage/records.js";
import { type AuditEvent, type AuditTrail, type EntryContext, UNAUDITED } from "../audit/audit-trail.js";
import type { Caller } from "../caller.js";
import type { RootKeyService } from "../root-keys/root-key-service.js";

export interface SessionTimeouts {
  /** A session not used for this long ends. */
  idleMs: number;
  /** A session ends this long after sign-in, used or not. */
  absoluteMs: number;
}

/** What the dashboard learns about its session: never the root key, never the session id (a cookie it cannot read). */
export interface SessionView {
  workspaceId: string;
  rootKeyId: string;
  csrfToken: string;
  /** When the session ends at the latest (the absolute timeout). */
  expiresAt: number;
}

const SECRET_BYTES = 32;
/** A use within this long of the last recorded one is not written again: reads stay reads. */
const TOUCH_INTERVAL_MS = 60_000;

/**
 * Dashboard sessions: signing in with a root key opens one, and while it lasts it stands for that root key: the
 * root key is authenticated again on every use (by hash), so revoking or expiring it ends its sessions at once.
 * The cookie's value is the session id; the store holds only its SHA-256.
 */
export class DashboardSessionService {
  private readonly store: DashboardSessionStore;
  private readonly rootKeys: RootKeyService;
  private readonly clock: Clock;
  private readonly timeouts: SessionTimeouts;
  private readonly audit: AuditTrail;

  constructor(
    store: DashboardSessionStore,
    rootKeys: RootKeyService,
    clock: Clock,
    timeouts: SessionTimeouts,
    audit: AuditTrail = UNAUDITED,
  ) {
    this.store = store;
    this.rootKeys = rootKeys;
    this.clock = clock;
    this.timeouts = timeouts;
    this.audit = audit;
  }

  /**
   * Opens a session for a valid root key (a 401 otherwise) and returns its id, for the cookie, once. Both a sign-in
   * and a refused one are in the audit log; a refused one under the root key's workspace when the key is known.
   */
  async signIn(rootKey: string, context: EntryContext = NO_CONTEXT): Promise<{ sessionId: string; view: SessionView }> {
    await this.audit.admit();
    let caller: Caller;
    try {
      caller = await this.rootKeys.authenticate(rootKey);
    } catch (error) {
      const known = await this.rootKeys.identify(rootKey);
      this.audit.recordAs(known?.workspaceId ?? "", { type: "dashboard", id: known?.id ?? "", name: known?.name ?? "" }, context, {
        action: "dashboard.sign_in_failed",
        description: `Refused a dashboard sign-in: ${(error as Error).message}`,
        resources: known ? [{ type: "rootKey", id: known.id }] : [],
      });
      // Answered (401) only once the refusal is on record, as every write is (docs/audit-log.md#what-survives-what).
      await this.audit.settled();
      throw error;
    }
    const now = this.clock.now();
    const sessionId = secret();
    const record: DashboardSessionRecord = {
      id: hashKey(sessionId),
      rootKeyHash: hashKey(rootKey),
      workspaceId: caller.workspaceId,
      csrfToken: secret(),
      createdAt: now,
      lastSeenAt: now,
    };
    if (!(await this.store.create(record, this.ttl(record, now)))) throw new Error("session id collision; try again");
    this.recordAs(caller, context, "dashboard.sign_in", "Signed in to the dashboard");
    await this.audit.settled();
    return { sessionId, view: this.viewOf(record, caller) };
  }

  /**
   * The root key behind a session and the session as the dashboard sees it; a 401 for a session that is unknown,
   * timed out, or whose root key is no longer valid. Records the use (the idle timeout starts again).
   */
  async resume(sessionId: string): Promise<{ caller: Caller; view: SessionView }> {
    const id = hashKey(sessionId);
    const record = await this.store.get(id);
    const now = this.clock.now();
    if (!record || now - record.lastSeenAt >= this.timeouts.idleMs || now - record.createdAt >= this.timeouts.absoluteMs) {
      if (record) await this.store.delete(id);
      throw sessionInvalid();
    }
    let caller: Caller;
    try {
      caller = await this.rootKeys.authenticateHash(record.rootKeyHash);
    } catch (error) {
      if (error instanceof KeygateError && error.code === "err:unkey:authentication:key_not_found") {
        await this.store.delete(id);
        throw sessionInvalid("The session's root key has been revoked or has expired; sign in again.");
      }
      throw error;
    }
    if (now - record.lastSeenAt >= TOUCH_INTERVAL_MS) await this.store.touch(id, now, this.ttl(record, now));
    return { caller, view: this.viewOf(record, caller) };
  }

  /** Whether `presented` is the session's CSRF token (compared in constant time). */
  static csrfMatches(view: SessionView, presented: string | undefined): boolean {
    if (presented === undefined) return false;
    const expected = Buffer.from(view.csrfToken);
    const given = Buffer.from(presented);
    return expected.length === given.length && timingSafeEqual(expected, given);
  }

  /** Ends a session; `caller` (the session's root key, from resume) is named in the audit entry. */
  async signOut(sessionId: string, caller?: Caller, context: EntryContext = NO_CONTEXT): Promise<void> {
    await this.store.delete(hashKey(sessionId));
    if (caller) this.recordAs(caller, context, "dashboard.sign_out", "Signed out of the dashboard");
    await this.audit.settled();
  }

  private recordAs(caller: Caller, context: EntryContext, action: AuditEvent["action"], description: string): void {
    const actor = { type: "dashboard" as const, id: caller.rootKeyId, name: caller.rootKeyName };
    this.audit.recordAs(caller.workspaceId, actor, context, {
      action,
      description,
      resources: [{ type: "rootKey", id: caller.rootKeyId }],
    });
  }

  /** The store forgets a session once neither timeout can leave it alive. */
  private ttl(record: DashboardSessionRecord, now: number): number {
    return Math.max(1, Math.min(this.timeouts.idleMs, record.createdAt + this.timeouts.absoluteMs - now));
  }

  private viewOf(record: DashboardSessionRecord, caller: Caller): SessionView {
    return {
      workspaceId: record.workspaceId,
      rootKeyId: caller.rootKeyId,
      csrfToken: record.csrfToken,
      expiresAt: record.createdAt + this.timeouts.absoluteMs,
    };
  }
}

const NO_CONTEXT: EntryContext = { requestId: "", clientAddress: "", userAgent: "" };

function secret(): string {
  return base58Encode(randomBytes(SECRET_BYTES));
}

function sessionInvalid(detail = "The dashboard session has ended or does not exist; sign in again."): KeygateError {
  return new KeygateError("err:keygate:authentication:session_invalid", detail);
}
