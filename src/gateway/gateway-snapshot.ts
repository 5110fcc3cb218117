import { compileTrust, type ProxyTrust } from "./client-address.js";
import type { GatewaySettings, RouteConfig } from "./route-config.js";
import { RouteTable } from "./route-table.js";

/** The routes and settings a request is served with: one immutable snapshot. */
export interface GatewaySnapshot {
  readonly table: RouteTable;
  readonly settings: GatewaySettings;
  /** `settings.trustProxy`, compiled. */
  readonly trust: ProxyTrust;
}

/** Compiles a validated configuration's routes and gateway settings (throws RouteTableError for bad routes). */
export function compileGatewaySnapshot(config: { routes: readonly RouteConfig[]; gateway: GatewaySettings }): GatewaySnapshot {
  return { table: RouteTable.compile(config.routes), settings: config.gateway, trust: compileTrust(config.gateway.trustProxy) };
}

/**
 * The snapshot the gateway serves new requests with. A reload replaces it in one assignment; a request reads it
 * once when it starts, so requests in flight finish on the routes they began with.
 */
export class CurrentGatewaySnapshot {
  private snapshot: GatewaySnapshot;

  constructor(initial: GatewaySnapshot) {
    this.snapshot = initial;
  }

  get current(): GatewaySnapshot {
    return this.snapshot;
  }

  replace(next: GatewaySnapshot): void {
    this.snapshot = next;
  }
}
