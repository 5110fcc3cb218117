import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { RouteResponse, RouteTarget, routeResponse } from "./route-wire.js";

export default defineProcedure({
  name: "keygate.getRoute",
  audit: "none",
  body: Strict(RouteTarget),
  data: RouteResponse,
  handler: async ({ body, caller, services }) => routeResponse(await services.routes.getRoute(caller, body)),
});
