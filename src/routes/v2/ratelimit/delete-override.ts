import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { IdentifierField, NamespaceField } from "./wire.js";

export default defineProcedure({
  name: "ratelimit.deleteOverride",
  audit: ["ratelimit.delete_override"],
  aliases: ["ratelimits.deleteOverride"],
  /** The identifier or pattern exactly as it was set. */
  body: Strict({ namespace: NamespaceField, identifier: IdentifierField }),
  data: Type.Object({}),
  handler: async ({ body, caller, services }) => {
    await services.ratelimit.deleteOverride(caller, body);
    return {};
  },
});
