import type { FastifyInstance } from "fastify";
import type { Caller } from "../../../domain/caller.js";
import { cookieNamed } from "../../../http/dashboard-session.js";
import { registerProcedures } from "../procedure.js";
import { PORTAL_EXCHANGE, PORTAL_SESSION_PROCEDURES } from "./index.js";

/** The cookie a portal session travels in (Unkey's name): set by the portal's pages, sent by the SDK itself. */
export const PORTAL_COOKIE = "portal_session";

/**
 * portal.exchangeCode (the code is its own credential) and the customer's procedures, authenticated by the
 * portal session alone: a root key is neither needed nor accepted there, and the session's Caller holds only
 * what its scopes stand for. The portal's pages reach the same procedures under their own path, with CSRF
 * (routes/portal-pages.ts).
 */
export async function portalSessionRoutes(app: FastifyInstance): Promise<void> {
  registerProcedures(app, [PORTAL_EXCHANGE]);
  await app.register(async (withSession) => {
    withSession.decorateRequest("caller", null as unknown as Caller);
    withSession.addHook("onRequest", async (request) => {
      const context = await app.services.portals.sessions.authenticate(cookieNamed(request, PORTAL_COOKIE));
      request.caller = context.caller;
      request.portalContext = context;
      request.keyId = context.session.sessionId;
    });
    registerProcedures(withSession, PORTAL_SESSION_PROCEDURES, "portal");
  });
}
