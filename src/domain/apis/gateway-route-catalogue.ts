import type { Caller } from "../caller.js";
import { requireApi } from "../root-keys/permissions.js";
import type { ApiService } from "./api-service.js";

/**
 * The gateway's routes as a root key may read them (keygate.listRoutes): the configuration is global, so a
 * caller sees only the routes in front of APIs of its own workspace that it may read. `current` gives the routes
 * of the gateway's current snapshot (a reload changes them).
 */
export class GatewayRouteCatalogue<Route extends { apiId: string }> {
  private readonly current: () => readonly Route[];
  private readonly apis: ApiService;

  constructor(current: () => readonly Route[], apis: ApiService) {
    this.current = current;
    this.apis = apis;
  }

  async listRoutes(caller: Caller): Promise<Route[]> {
    if (!caller.can(requireApi("read_api")) && caller.namedResourceIds("api").length === 0) caller.authorize(requireApi("read_api"));
    const visible: Route[] = [];
    for (const route of this.current()) {
      if (!caller.can(requireApi("read_api", route.apiId))) continue;
      if ((await this.apis.workspaceOf(route.apiId)) === caller.workspaceId) visible.push(route);
    }
    return visible;
  }
}
