import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { PolicyChangeFields, policyChangeFromWire } from "../keygate/route-wire.js";
import { defineProcedure } from "../procedure.js";
import { DeploymentTarget } from "./gateway-wire.js";

export default defineProcedure({
  name: "gateway.updatePolicy",
  audit: ["route.update_policy"],
  body: Strict({ ...DeploymentTarget, ...PolicyChangeFields }),
  data: Type.Object({}),
  handler: async ({ body, caller, services }) => {
    const { app, project: _project, environment: _environment, policyId, ...change } = body;
    await services.routes.updateRoutePolicy(caller, { route: app, policyId, ...policyChangeFromWire(change) });
    return {};
  },
});
