import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { policiesFromWire, RouteFields, RouteResponse, routeResponse } from "./route-wire.js";

export default defineProcedure({
  name: "keygate.createRoute",
  audit: ["route.create"],
  body: Strict(RouteFields),
  data: RouteResponse,
  handler: async ({ body, caller, services }) => {
    const { policies, ...route } = body;
    return routeResponse(await services.routes.createRoute(caller, { ...route, policies: policiesFromWire(policies ?? []) }));
  },
});
