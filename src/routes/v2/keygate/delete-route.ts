import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { RouteTarget } from "./route-wire.js";

export default defineProcedure({
  name: "keygate.deleteRoute",
  audit: ["route.delete"],
  body: Strict(RouteTarget),
  data: Type.Object({}),
  handler: async ({ body, caller, services }) => {
    await services.routes.deleteRoute(caller, body);
    return {};
  },
});
