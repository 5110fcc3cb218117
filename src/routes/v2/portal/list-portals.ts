import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { PortalResponse } from "./portal-wire.js";

/** keygate's own (the dashboard's list): the portals the root key may read. */
export default defineProcedure({
  name: "portal.listPortals",
  audit: "none",
  body: Strict({}),
  data: Type.Object({ portals: Type.Array(PortalResponse) }),
  handler: async ({ caller, services }) => ({ portals: await services.portals.records.listPortals(caller) }),
});
