import { Type } from "typebox";
import { Nullable, Strict, StringEnum } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { CreditAmount, CreditsResponse, KeyId } from "../schemas.js";

export default defineProcedure({
  name: "keys.updateCredits",
  audit: ["key.update"],
  body: Strict({
    keyId: KeyId,
    operation: StringEnum(["set", "increment", "decrement"]),
    value: Type.Optional(Nullable(CreditAmount)),
  }),
  data: CreditsResponse,
  handler: ({ body, caller, services }) => services.keys.updateCredits(caller, body),
});
