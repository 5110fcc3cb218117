import { compileTrust, type ProxyTrust } from "./client-address.js";
import type { GatewaySettings, RouteConfig } from "./route-config.js";
import { RouteTable } from "./route-table.js";

/** The routes and settings a request is served with: one immutable snapshot. */
export interface GatewayState {
  readonly table: RouteTable;
  readonly settings: GatewaySettings;
  /** `settings.trustProxy`, compiled. */
  readonly trust: ProxyTrust;
}

/** Compiles a validated configuration's routes and gateway settings (throws RouteTableError for bad routes). */
export function compileGatewayState(config: { routes: readonly RouteConfig[]; gateway: GatewaySettings }): GatewayState {
  return { table: RouteTable.compile(config.routes), settings: config.gateway, trust: compileTrust(config.gateway.trustProxy) };
}

/**
 * The gateway's current routes. A reload replaces the snapshot in one assignment; a request reads it once when
 * it starts, so requests in flight finish on the routes they began with.
 */
export class RouteState {
  private snapshot: GatewayState;

  constructor(initial: GatewayState) {
    this.snapshot = initial;
  }

  get current(): GatewayState {
    return this.snapshot;
  }

  replace(next: GatewayState): void {
    this.snapshot = next;
  }
}
