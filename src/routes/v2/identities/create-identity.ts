import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { ExternalId, Meta, RatelimitsInput } from "../schemas.js";

export default defineProcedure({
  name: "identities.createIdentity",
  audit: ["identity.create"],
  body: Strict({ externalId: ExternalId, meta: Type.Optional(Meta), ratelimits: Type.Optional(RatelimitsInput) }),
  data: Type.Object({ identityId: Type.String() }),
  handler: ({ body, caller, services }) => services.identities.createIdentity(caller, body),
});
