import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { IdentifierField, NamespaceField, OverrideData, overrideData, ratelimitProcedure } from "./wire.js";

export default defineProcedure({
  ...ratelimitProcedure("getOverride"),
  body: Strict({ namespace: NamespaceField, identifier: IdentifierField }),
  data: OverrideData,
  handler: async ({ body, caller, services }) => overrideData(await services.ratelimit.getOverride(caller, body)),
});
