import { POLICY_LIST } from "../../../gateway/policy-schema.js";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { policiesFromWire, RouteResponse, RouteTarget, routeResponse } from "./route-wire.js";

/** Replaces a route's policies, all at once; a policy whose name stays keeps its id and its rate limit counts. */
export default defineProcedure({
  name: "keygate.setRoutePolicies",
  audit: ["route.set_policies"],
  body: Strict({ ...RouteTarget, policies: POLICY_LIST }),
  data: RouteResponse,
  handler: async ({ body, caller, services }) =>
    routeResponse(await services.routes.setRoutePolicies(caller, { route: body.route, policies: policiesFromWire(body.policies) })),
});
