import { Type } from "typebox";
import { RouteSchema } from "../../../gateway/route-config.js";
import { Strict } from "../../../http/schemas.js";
import { redactUrl } from "../../../lib/redact-url.js";
import { defineProcedure } from "../procedure.js";

export default defineProcedure({
  name: "keygate.listRoutes",
  body: Strict({}),
  data: Type.Array(RouteSchema),
  // An upstream URL may carry credentials; they are configuration, never an answer.
  handler: async ({ caller, services }) =>
    (await services.routeCatalogue.listRoutes(caller)).map((route) =>
      route.upstream.includes("@") ? { ...route, upstream: redactUrl(route.upstream) } : route,
    ),
});
