import type { RouteRecord } from "./route-records.js";

/** The stored gateway routes as of one instant: `version` grows by one with every write. */
export interface StoredRouteTable {
  version: number;
  routes: RouteRecord[];
}

/** What a change of the route table writes: the next routes, and an OpenAPI document stored (text) or removed (null). */
export interface RouteTableChange<R> {
  result: R;
  /** Absent: nothing is written and the version stays. */
  routes?: RouteRecord[];
  openApi?: { routeId: string; text: string | null };
}

/**
 * The gateway routes managed through the API: one table every instance reads, changed atomically. A route's
 * OpenAPI document is kept apart (it may be large) and read when the route table is compiled.
 */
export interface RouteStore {
  table(): Promise<StoredRouteTable>;
  /** The version alone: instances poll it to learn of changes they missed. */
  version(): Promise<number>;
  /**
   * Changes the table atomically: `change` gets the current table and says what to write; when another writer got
   * there first it is called again with the newer table. Returns `change`'s result.
   */
  update<R>(change: (current: StoredRouteTable) => RouteTableChange<R>): Promise<R>;
  /** A route's OpenAPI document as uploaded; null when it has none. */
  openApi(routeId: string): Promise<string | null>;
}
