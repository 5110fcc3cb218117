import { randomBytes } from "node:crypto";
import { KeygateError } from "../../errors/keygate-error.js";
import { base58Encode } from "../../lib/base58.js";
import type { Clock } from "../../lib/clock.js";
import { defined } from "../../lib/defined.js";
import { hashKey } from "../../lib/hash.js";
import { newId } from "../../lib/ids.js";
import type { PortalSessionStore } from "../../storage/portal-interfaces.js";
import type { PortalCodeRecord, PortalRecord, PortalScope, PortalSessionRecord } from "../../storage/portal-records.js";
import { type AuditActor, type AuditTrail, created, type EntryContext, NO_CONTEXT, UNAUDITED } from "../audit/audit-trail.js";
import type { Caller } from "../caller.js";
import { requirePortal } from "../root-keys/permissions.js";
import { PortalCaller, scopeRequirement } from "./portal-caller.js";
import { checkWebUrl, type PortalService, portalNotFound } from "./portal-service.js";

/** How long a code waits to be redeemed, and how long the session it becomes lasts. */
export const CODE_TTL_MS = 15 * 60_000;
export const SESSION_TTL_MS = 24 * 60 * 60_000;
const SECRET_BYTES = 32;

export interface CreateSessionInput {
  portal: string;
  externalId: string;
  scopes: PortalScope[];
  returnUrl?: string;
  preview: boolean;
  /** Where keygate is reached (`https://keys.example.com`): the URL answered starts with it. */
  origin: string;
}

/** A customer's session, checked: the session, its portal as it is now, the APIs it serves, and the Caller it is. */
export interface PortalContext {
  session: PortalSessionRecord;
  portal: PortalRecord;
  apiIds: string[];
  caller: Caller;
}

/** What an exchange answers: the access token (for the cookie) and when the session ends. */
export interface ExchangedSession {
  accessToken: string;
  expiresAt: number;
  session: PortalSessionRecord;
}

/**
 * portal.createSession and portal.exchangeCode, and a session's check on every use. A code is single-use and
 * lives 15 minutes; the session it becomes lasts 24 hours. Both are stored under their SHA-256 only. A session
 * ends early when its portal is deleted, disabled or mapped elsewhere (the epoch it carries is no longer the
 * portal's).
 */
export class PortalSessionService {
  private readonly store: PortalSessionStore;
  private readonly portals: PortalService;
  private readonly clock: Clock;

  private readonly audit: AuditTrail;

  constructor(options: { store: PortalSessionStore; portals: PortalService; clock: Clock; audit?: AuditTrail }) {
    this.store = options.store;
    this.portals = options.portals;
    this.clock = options.clock;
    this.audit = options.audit ?? UNAUDITED;
  }

  /**
   * A one-time URL for one customer. A caller that may not mint sessions for the portal gets the 404 a missing
   * portal gets; each scope needs its root-key permissions on every API of the portal (403 otherwise).
   */
  async createSession(caller: Caller, input: CreateSessionInput): Promise<{ id: string; url: string }> {
    const portal = await this.portals.find(caller.workspaceId, input.portal).catch(() => null);
    if (!portal || !caller.can(requirePortal("create_portal_session", portal.id))) throw portalNotFound(input.portal);
    if (!portal.enabled)
      throw new KeygateError("err:unkey:application:precondition_failed", `The portal '${portal.slug}' is disabled; enable it first.`);
    const apiIds = await this.portals.apisOf(caller.workspaceId, portal.mapping);
    for (const scope of input.scopes) for (const apiId of apiIds) caller.authorize(scopeRequirement(scope, apiId));
    checkWebUrl(input.returnUrl, "body.returnUrl");

    const now = this.clock.now();
    const code = `pst_${secret()}`;
    const record: PortalCodeRecord = {
      hash: hashKey(code),
      sessionId: newId("ps", now),
      workspaceId: caller.workspaceId,
      portalId: portal.id,
      epoch: portal.epoch,
      externalId: input.externalId,
      scopes: [...new Set(input.scopes)],
      ...defined({ returnUrl: input.returnUrl, preview: input.preview || undefined }),
      createdAt: now,
      expiresAt: now + CODE_TTL_MS,
    };
    if (!(await this.store.createCode(record, CODE_TTL_MS))) throw new Error("portal code collision; try again");
    this.audit.record(caller, {
      action: "portal.create_session",
      description: `Created a session link to portal ${portal.slug} for ${input.externalId}`,
      resources: [
        { type: "portal", id: portal.id },
        { type: "portalSession", id: record.sessionId },
      ],
      changes: created({
        externalId: input.externalId,
        scopes: record.scopes,
        returnUrl: input.returnUrl,
        preview: input.preview || undefined,
      }),
    });
    return { id: record.sessionId, url: `${input.origin}/portal/${encodeURIComponent(portal.slug)}?code=${code}` };
  }

  /**
   * Redeems a code, once, for a session. A second redemption is refused; but when the caller already holds the
   * session that code became (`heldToken`: a browser retrying after it got the cookie), that session is answered.
   */
  async exchangeCode(code: string, heldToken?: string, context: EntryContext = NO_CONTEXT): Promise<ExchangedSession> {
    const codeHash = hashKey(code);
    const redeemed = await this.store.redeemCode(codeHash);
    const now = this.clock.now();
    if (!redeemed || redeemed.code.expiresAt <= now) throw sessionNotFound("The portal link is unknown or has expired; ask for a new one.");
    if (!redeemed.first) {
      const held = heldToken === undefined ? null : await this.store.getSession(hashKey(heldToken));
      if (held && heldToken !== undefined && held.codeHash === codeHash && held.expiresAt > now)
        return { accessToken: heldToken, expiresAt: held.expiresAt, session: held };
      throw sessionNotFound("The portal link has already been used; ask for a new one.");
    }
    const grant = redeemed.code;
    const portal = await this.portals.current(grant.workspaceId, grant.portalId);
    if (!portal || portal.epoch !== grant.epoch || !portal.enabled)
      throw sessionNotFound("The portal behind this link was changed or removed; ask for a new one.");
    const accessToken = `pat_${secret()}`;
    const session: PortalSessionRecord = {
      hash: hashKey(accessToken),
      sessionId: grant.sessionId,
      workspaceId: grant.workspaceId,
      portalId: grant.portalId,
      epoch: grant.epoch,
      externalId: grant.externalId,
      scopes: grant.scopes,
      ...defined({ returnUrl: grant.returnUrl, preview: grant.preview }),
      codeHash,
      csrfToken: secret(),
      createdAt: now,
      expiresAt: now + SESSION_TTL_MS,
    };
    if (!(await this.store.createSession(session, SESSION_TTL_MS))) throw new Error("portal session collision; try again");
    this.audit.recordAs(session.workspaceId, portalActor(session), context, {
      action: "portal.exchange_code",
      description: `${session.externalId} opened portal ${portal.slug}`,
      resources: [
        { type: "portal", id: portal.id },
        { type: "portalSession", id: session.sessionId },
      ],
      changes: [],
    });
    return { accessToken, expiresAt: session.expiresAt, session };
  }

  /** The session behind an access token, checked against its portal as it is now (401 otherwise). */
  async authenticate(accessToken: string | undefined): Promise<PortalContext> {
    if (accessToken === undefined)
      throw new KeygateError("err:unkey:authentication:portal_token_missing", "No portal session: open the portal from its link.");
    const hash = hashKey(accessToken);
    const session = await this.store.getSession(hash);
    if (!session || session.expiresAt <= this.clock.now())
      throw sessionNotFound("The portal session has ended; open the portal from a new link.");
    const portal = await this.portals.current(session.workspaceId, session.portalId);
    if (!portal || portal.epoch !== session.epoch || !portal.enabled) {
      await this.store.deleteSession(hash);
      throw sessionNotFound("The portal was changed or removed, which ended this session; open the portal from a new link.");
    }
    const apiIds = await this.portals.apisOf(session.workspaceId, portal.mapping).catch(() => []);
    return { session, portal, apiIds, caller: new PortalCaller(session, session.scopes, apiIds) };
  }

  async signOut(accessToken: string, context: EntryContext = NO_CONTEXT): Promise<void> {
    const hash = hashKey(accessToken);
    const session = await this.store.getSession(hash);
    await this.store.deleteSession(hash);
    if (!session) return;
    this.audit.recordAs(session.workspaceId, portalActor(session), context, {
      action: "portal.sign_out",
      description: `${session.externalId} signed out of portal ${session.portalId}`,
      resources: [
        { type: "portal", id: session.portalId },
        { type: "portalSession", id: session.sessionId },
      ],
      changes: [],
    });
  }
}

/** The customer, as the audit log names a portal session's actions. */
function portalActor(session: { externalId: string }): AuditActor {
  return { type: "portal", id: session.externalId, name: "" };
}

function secret(): string {
  return base58Encode(randomBytes(SECRET_BYTES));
}

function sessionNotFound(detail: string): KeygateError {
  return new KeygateError("err:unkey:authentication:portal_session_not_found", detail);
}
