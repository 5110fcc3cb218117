import type { RouteDefinition } from "../domain/routes/route-compiler.js";
import type { StoredRouteTable } from "../storage/route-interfaces.js";
import type { RouteRecord } from "../storage/route-records.js";
import { compileTrust, type ProxyTrust } from "./client-address.js";
import type { OpenApiDocument } from "./openapi-documents.js";
import type { GatewaySettings, RouteConfig } from "./route-config.js";
import { RouteTable } from "./route-table.js";

/** The configuration file's part of the gateway: its routes and settings. */
export interface GatewayConfig {
  routes: readonly RouteConfig[];
  gateway: GatewaySettings;
}

/** The routes and settings a request is served with: one immutable snapshot. */
export interface GatewaySnapshot {
  readonly table: RouteTable;
  readonly settings: GatewaySettings;
  /** `settings.trustProxy`, compiled. */
  readonly trust: ProxyTrust;
  /** What it was compiled from: the configuration, and the stored routes at their version. */
  readonly config: GatewayConfig;
  readonly stored: StoredRouteTable;
  /**
   * The OpenAPI documents of the stored routes with an enabled openapi policy, by route id, compiled with the table
   * (RouteSync); a route without one here is not validated.
   */
  readonly openApi: ReadonlyMap<string, OpenApiDocument>;
}

const NO_STORED_ROUTES: StoredRouteTable = { version: 0, routes: [] };
const NO_DOCUMENTS: ReadonlyMap<string, OpenApiDocument> = new Map();

/**
 * Compiles the configuration's routes and gateway settings with the stored routes (throws RouteTableError for bad
 * routes of the configuration; a stored route that clashes with them is left out, see RouteTable.skipped).
 */
export function compileGatewaySnapshot(
  config: GatewayConfig,
  stored: StoredRouteTable = NO_STORED_ROUTES,
  openApi: ReadonlyMap<string, OpenApiDocument> = NO_DOCUMENTS,
): GatewaySnapshot {
  return {
    table: RouteTable.compile(config.routes, stored.routes.map(storedDefinition)),
    settings: config.gateway,
    trust: compileTrust(config.gateway.trustProxy),
    config: { routes: config.routes, gateway: config.gateway },
    stored,
    openApi,
  };
}

function storedDefinition(route: RouteRecord): RouteDefinition {
  const { createdAt: _createdAt, updatedAt: _updatedAt, ...fields } = route;
  // `fields` is this call's own object: its source is assigned, not spread on (docs/architecture.md#conventions).
  const definition = fields as RouteDefinition;
  definition.source = "api";
  return definition;
}

/**
 * The snapshot the gateway serves new requests with. A change (a configuration reload, a newer stored table)
 * replaces it in one assignment; a request reads it once when it starts, so requests in flight finish on the routes
 * they began with, and none sees part of a change.
 */
export class CurrentGatewaySnapshot {
  private snapshot: GatewaySnapshot;
  private readonly listeners: ((snapshot: GatewaySnapshot) => void)[] = [];

  constructor(initial: GatewaySnapshot) {
    this.snapshot = initial;
  }

  get current(): GatewaySnapshot {
    return this.snapshot;
  }

  /** Calls `listener` with each snapshot that replaces the current one, once it is in force. */
  watch(listener: (snapshot: GatewaySnapshot) => void): void {
    this.listeners.push(listener);
  }

  replace(next: GatewaySnapshot): void {
    this.snapshot = next;
    this.swapped();
  }

  /** A new configuration, with the stored routes in force. Throws RouteTableError (nothing changes then). */
  applyConfig(config: GatewayConfig): GatewaySnapshot {
    this.snapshot = compileGatewaySnapshot(config, this.snapshot.stored, this.snapshot.openApi);
    this.swapped();
    return this.snapshot;
  }

  /**
   * A stored table newer than the one in force, with its routes' compiled OpenAPI documents (an older table,
   * arriving late, changes nothing). Returns whether it applied.
   */
  applyStored(stored: StoredRouteTable, openApi: ReadonlyMap<string, OpenApiDocument> = NO_DOCUMENTS): boolean {
    if (stored.version <= this.snapshot.stored.version) return false;
    this.snapshot = compileGatewaySnapshot(this.snapshot.config, stored, openApi);
    this.swapped();
    return true;
  }

  private swapped(): void {
    for (const listener of this.listeners) listener(this.snapshot);
  }
}
