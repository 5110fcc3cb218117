import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import {
  DisplayName,
  Mapping,
  NullableKeyDefaults,
  NullableLogoUrl,
  NullablePrimaryColor,
  PortalIdentifier,
  PortalResponse,
  Slug,
} from "./portal-wire.js";

export default defineProcedure({
  name: "portal.updatePortal",
  audit: ["portal.update"],
  body: Strict({
    portal: PortalIdentifier,
    slug: Type.Optional(Slug),
    displayName: Type.Optional(DisplayName),
    mapping: Type.Optional(Mapping),
    enabled: Type.Optional(Type.Boolean()),
    logoUrl: Type.Optional(NullableLogoUrl),
    primaryColor: Type.Optional(NullablePrimaryColor),
    keyDefaults: Type.Optional(NullableKeyDefaults),
  }),
  data: PortalResponse,
  handler: ({ body, caller, services }) => services.portals.records.updatePortal(caller, body),
});
