import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { CreditsCreate, ExternalId, Meta, RatelimitsInput } from "../schemas.js";

export default defineProcedure({
  name: "identities.createIdentity",
  audit: ["identity.create"],
  body: Strict({
    externalId: ExternalId,
    meta: Type.Optional(Meta),
    ratelimits: Type.Optional(RatelimitsInput),
    /** keygate's extension: a balance the identity's keys without credits of their own share. */
    credits: Type.Optional(CreditsCreate),
  }),
  data: Type.Object({ identityId: Type.String() }),
  handler: ({ body, caller, services }) => services.identities.createIdentity(caller, body),
});
