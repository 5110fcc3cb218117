import { Type } from "typebox";
import { POLICY_LIST } from "../../../gateway/policy-schema.js";
import { Strict } from "../../../http/schemas.js";
import { policiesFromWire } from "../keygate/route-wire.js";
import { defineProcedure } from "../procedure.js";
import { DeploymentTarget } from "./gateway-wire.js";

export default defineProcedure({
  name: "gateway.setPolicies",
  audit: ["route.set_policies"],
  body: Strict({ ...DeploymentTarget, policies: POLICY_LIST }),
  data: Type.Object({}),
  handler: async ({ body, caller, services }) => {
    await services.routes.setRoutePolicies(caller, { route: body.app, policies: policiesFromWire(body.policies) });
    return {};
  },
});
