import type { Clock } from "../../lib/clock.js";
import { defined } from "../../lib/defined.js";
import type { Stores } from "../../storage/interfaces.js";
import type { AnalyticsService } from "../analytics/analytics-service.js";
import type { AuditTrail } from "../audit/audit-trail.js";
import type { KeyService } from "../keys/key-service.js";
import { PortalCustomerService } from "./portal-customer.js";
import { PortalService } from "./portal-service.js";
import { PortalSessionService } from "./portal-sessions.js";

/** The customer portal's three services: the portals as records, their sessions, and what a customer does in one. */
export class Portals {
  readonly records: PortalService;
  readonly sessions: PortalSessionService;
  readonly customers: PortalCustomerService;

  constructor(
    stores: Pick<Stores, "portals" | "portalSessions" | "apis" | "routes" | "keys" | "identities">,
    keyService: KeyService,
    analytics: AnalyticsService,
    clock: Clock,
    audit?: AuditTrail,
  ) {
    const audited = defined({ audit });
    this.records = new PortalService({ store: stores.portals, apis: stores.apis, routes: stores.routes, clock, ...audited });
    this.sessions = new PortalSessionService({ store: stores.portalSessions, portals: this.records, clock, ...audited });
    this.customers = new PortalCustomerService({ keyService, keys: stores.keys, identities: stores.identities, analytics, clock });
  }
}
