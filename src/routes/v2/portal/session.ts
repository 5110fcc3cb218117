import type { Caller } from "../../../domain/caller.js";
import type { PortalContext } from "../../../domain/portals/portal-sessions.js";

/**
 * The portal session the session routes put on every request they serve (session-routes.ts), acting as the
 * request's caller: the session's own, with the request's context for the audit log.
 */
export function sessionOf(context: { portal?: PortalContext; caller: Caller }): PortalContext {
  if (!context.portal) throw new Error("a portal session procedure ran without a portal session");
  return { ...context.portal, caller: context.caller };
}
