import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { Empty } from "../schemas.js";
import { PortalIdentifier } from "./portal-wire.js";

export default defineProcedure({
  name: "portal.deletePortal",
  audit: ["portal.delete"],
  body: Strict({ portal: PortalIdentifier }),
  data: Empty,
  handler: async ({ body, caller, services }) => {
    await services.portals.records.deletePortal(caller, body);
    return {};
  },
});
