import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { IdentifierField, NamespaceField, OverrideData, overrideData } from "./wire.js";

export default defineProcedure({
  name: "ratelimit.getOverride",
  audit: "none",
  aliases: ["ratelimits.getOverride"],
  body: Strict({ namespace: NamespaceField, identifier: IdentifierField }),
  data: OverrideData,
  handler: async ({ body, caller, services }) => overrideData(await services.ratelimit.getOverride(caller, body)),
});
