import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { KeyId, KeyResponse } from "../schemas.js";

export default defineProcedure({
  name: "keys.getKey",
  audit: ["key.reveal"],
  body: Strict({ keyId: KeyId, decrypt: Type.Boolean({ default: false }) }),
  data: KeyResponse,
  handler: ({ body, caller, services }) => services.keys.getKey(caller, body),
});
