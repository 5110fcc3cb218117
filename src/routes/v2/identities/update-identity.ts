import { Type } from "typebox";
import { Nullable, Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { CreditsUpdate, IdentityWithCreditsResponse, Meta, RatelimitsInput } from "../schemas.js";

export default defineProcedure({
  name: "identities.updateIdentity",
  audit: ["identity.update"],
  body: Strict({
    identity: Type.String({ minLength: 1, maxLength: 255 }),
    meta: Type.Optional(Meta),
    ratelimits: Type.Optional(RatelimitsInput),
    /** keygate's extension: the balance the identity's keys share, three-state as updateKey's credits. */
    credits: Type.Optional(Nullable(CreditsUpdate)),
  }),
  data: IdentityWithCreditsResponse,
  handler: ({ body, caller, services }) => services.identities.updateIdentity(caller, body),
});
