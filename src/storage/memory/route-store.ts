import type { RouteStore, RouteTableChange, StoredRouteTable } from "../route-interfaces.js";
import type { RouteRecord } from "../route-records.js";

/** The route table in memory: records are copied in and out, as a store would. */
export class MemoryRouteStore implements RouteStore {
  private current: StoredRouteTable = { version: 0, routes: [] };
  private readonly documents = new Map<string, string>();

  async table(): Promise<StoredRouteTable> {
    return structuredClone(this.current);
  }

  async version(): Promise<number> {
    return this.current.version;
  }

  async update<R>(change: (current: StoredRouteTable) => RouteTableChange<R>): Promise<R> {
    const next = change(structuredClone(this.current));
    if (next.routes === undefined) return next.result;
    this.current = { version: this.current.version + 1, routes: structuredClone(next.routes) };
    const ids = new Set(next.routes.map((route: RouteRecord) => route.id));
    for (const id of this.documents.keys()) if (!ids.has(id)) this.documents.delete(id);
    if (next.openApi) {
      if (next.openApi.text === null) this.documents.delete(next.openApi.routeId);
      else this.documents.set(next.openApi.routeId, next.openApi.text);
    }
    return next.result;
  }

  async openApi(routeId: string): Promise<string | null> {
    return this.documents.get(routeId) ?? null;
  }
}
