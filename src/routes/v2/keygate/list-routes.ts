import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { RouteResponse, routeResponse } from "./route-wire.js";

export default defineProcedure({
  name: "keygate.listRoutes",
  audit: "none",
  body: Strict({}),
  data: Type.Array(RouteResponse),
  handler: async ({ caller, services }) => (await services.routes.listRoutes(caller)).map(routeResponse),
});
