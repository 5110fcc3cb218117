import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { IdentityResponse, Meta, RatelimitsInput } from "../schemas.js";

export default defineProcedure({
  name: "identities.updateIdentity",
  audit: ["identity.update"],
  body: Strict({
    identity: Type.String({ minLength: 1, maxLength: 255 }),
    meta: Type.Optional(Meta),
    ratelimits: Type.Optional(RatelimitsInput),
  }),
  data: IdentityResponse,
  handler: ({ body, caller, services }) => services.identities.updateIdentity(caller, body),
});
