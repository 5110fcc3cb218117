import { Type } from "typebox";
import { Nullable, Strict, StringEnum } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { CreditAmount, CreditsResponse } from "../schemas.js";

/** Keygate's own: keys.updateCredits for the balance an identity's keys share (the identity by id or externalId). */
export default defineProcedure({
  name: "keygate.updateIdentityCredits",
  audit: ["identity.update"],
  body: Strict({
    identity: Type.String({ minLength: 1, maxLength: 255 }),
    operation: StringEnum(["set", "increment", "decrement"]),
    value: Type.Optional(Nullable(CreditAmount)),
  }),
  data: CreditsResponse,
  handler: ({ body, caller, services }) => services.identities.updateIdentityCredits(caller, body),
});
