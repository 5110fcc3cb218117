import type { GatewaySettings } from "./route-config.js";
import { RouteTable } from "./route-table.js";

/** The routes and settings a request is served with: one immutable snapshot. */
export interface GatewayState {
  readonly table: RouteTable;
  readonly settings: GatewaySettings;
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
