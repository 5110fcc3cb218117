import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { IdentityWithCreditsResponse } from "../schemas.js";

export default defineProcedure({
  name: "identities.getIdentity",
  audit: "none",
  body: Strict({ identity: Type.String({ minLength: 1, maxLength: 255 }) }),
  data: IdentityWithCreditsResponse,
  handler: ({ body, caller, services }) => services.identities.getIdentity(caller, body),
});
