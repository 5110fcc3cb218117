import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { Expires, KeyId } from "../schemas.js";

export default defineProcedure({
  name: "keys.rerollKey",
  audit: ["key.reroll"],
  body: Strict({ keyId: KeyId, expiration: Expires }),
  data: Type.Object({ keyId: Type.String(), key: Type.String() }),
  handler: ({ body, caller, services }) => services.keys.rerollKey(caller, body),
});
