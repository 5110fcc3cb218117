import { Type } from "typebox";
import type { RouteChange } from "../../../domain/routes/route-service.js";
import { RouteEdgeChanges } from "../../../gateway/route-config.js";
import { Nullable, Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { policiesFromWire, RouteFields, RouteResponse, RouteTarget, routeResponse } from "./route-wire.js";

/** Fields given replace the stored ones; the optional ones (`forward`, `timeoutMs`, `rewrite`, ...) may be null to remove them. */
export default defineProcedure({
  name: "keygate.updateRoute",
  audit: ["route.update"],
  body: Strict({
    ...RouteTarget,
    name: Type.Optional(RouteFields.name),
    match: Type.Optional(RouteFields.match),
    upstream: Type.Optional(RouteFields.upstream),
    policies: RouteFields.policies,
    forward: Type.Optional(Nullable(RouteFields.forward)),
    timeoutMs: Type.Optional(Nullable(Type.Integer({ minimum: 100, maximum: 3_600_000 }))),
    ...RouteEdgeChanges,
  }),
  data: RouteResponse,
  handler: async ({ body, caller, services }) => {
    const { policies, ...change } = body;
    const update: { route: string } & RouteChange = change;
    if (policies !== undefined) update.policies = policiesFromWire(policies);
    return routeResponse(await services.routes.updateRoute(caller, update));
  },
});
