import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { RouteTarget } from "./route-wire.js";

export default defineProcedure({
  name: "keygate.getRouteOpenApi",
  audit: "none",
  body: Strict(RouteTarget),
  data: Type.Object({ document: Type.Optional(Type.String()) }),
  handler: async ({ body, caller, services }) => {
    const document = await services.routes.getRouteOpenApi(caller, body);
    return document === null ? {} : { document };
  },
});
