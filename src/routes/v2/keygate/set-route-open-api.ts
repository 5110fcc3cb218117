import { Type } from "typebox";
import { Nullable, Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { RouteResponse, RouteTarget, routeResponse } from "./route-wire.js";

/** The OpenAPI document (JSON or YAML text) the route's openapi policies validate requests against; null removes it. */
export default defineProcedure({
  name: "keygate.setRouteOpenApi",
  audit: ["route.set_openapi"],
  body: Strict({ ...RouteTarget, document: Nullable(Type.String({ minLength: 1 })) }),
  data: RouteResponse,
  handler: async ({ body, caller, services }) => routeResponse(await services.routes.setRouteOpenApi(caller, body)),
});
