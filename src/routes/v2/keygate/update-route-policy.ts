import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { PolicyChangeFields, policyChangeFromWire, RouteResponse, RouteTarget, routeResponse } from "./route-wire.js";

/** Changes one policy, keeping its id and its place. */
export default defineProcedure({
  name: "keygate.updateRoutePolicy",
  audit: ["route.update_policy"],
  body: Strict({ ...RouteTarget, ...PolicyChangeFields }),
  data: RouteResponse,
  handler: async ({ body, caller, services }) => {
    const { route, policyId, ...change } = body;
    return routeResponse(await services.routes.updateRoutePolicy(caller, { route, policyId, ...policyChangeFromWire(change) }));
  },
});
