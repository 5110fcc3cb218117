import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { PortalIdentifier, ReturnUrl, Scope } from "./portal-wire.js";

export default defineProcedure({
  name: "portal.createSession",
  audit: ["portal.create_session"],
  noStore: true,
  body: Strict({
    portal: PortalIdentifier,
    externalId: Type.String({ minLength: 1, maxLength: 256 }),
    scopes: Type.Array(Scope, { minItems: 1, maxItems: 4 }),
    preview: Type.Boolean({ default: false }),
    returnUrl: Type.Optional(ReturnUrl),
  }),
  data: Type.Object({ id: Type.String(), url: Type.String() }),
  handler: ({ body, caller, services, origin }) => services.portals.sessions.createSession(caller, { ...body, origin: origin() }),
});
