import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { PortalIdentifier, PortalResponse } from "./portal-wire.js";

export default defineProcedure({
  name: "portal.getPortal",
  audit: "none",
  body: Strict({ portal: PortalIdentifier }),
  data: PortalResponse,
  handler: ({ body, caller, services }) => services.portals.records.getPortal(caller, body),
});
