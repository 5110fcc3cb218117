import type { PortalContext } from "../../../domain/portals/portal-sessions.js";

/** The portal session the session routes put on every request they serve (session-routes.ts). */
export function sessionOf(context: { portal?: PortalContext }): PortalContext {
  if (!context.portal) throw new Error("a portal session procedure ran without a portal session");
  return context.portal;
}
