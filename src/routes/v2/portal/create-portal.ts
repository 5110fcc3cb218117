import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { DisplayName, KeyDefaults, LogoUrl, Mapping, PrimaryColor, Slug } from "./portal-wire.js";

export default defineProcedure({
  name: "portal.createPortal",
  audit: ["portal.create"],
  body: Strict({
    slug: Slug,
    displayName: DisplayName,
    mapping: Mapping,
    enabled: Type.Boolean({ default: true }),
    logoUrl: Type.Optional(LogoUrl),
    primaryColor: Type.Optional(PrimaryColor),
    keyDefaults: Type.Optional(KeyDefaults),
  }),
  data: Type.Object({ portalId: Type.String() }),
  handler: ({ body, caller, services }) => services.portals.records.createPortal(caller, body),
});
