import { Type } from "typebox";
import { PolicyResponseSchema } from "../../../gateway/policy-schema.js";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { DeploymentTarget } from "./gateway-wire.js";

export default defineProcedure({
  name: "gateway.listPolicies",
  audit: "none",
  body: Strict(DeploymentTarget),
  data: Type.Array(PolicyResponseSchema, { maxItems: 50 }),
  handler: async ({ body, caller, services }) => (await services.routes.getRoute(caller, { route: body.app })).policies,
});
