import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { Empty, KeyId } from "../schemas.js";

export default defineProcedure({
  name: "keys.deleteKey",
  audit: ["key.delete"],
  body: Strict({ keyId: KeyId, permanent: Type.Boolean({ default: false }) }),
  data: Empty,
  handler: async ({ body, caller, services }) => {
    await services.keys.deleteKey(caller, body);
    return {};
  },
});
