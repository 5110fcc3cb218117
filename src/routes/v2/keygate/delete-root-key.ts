import { Type } from "typebox";
import { ID_PATTERN, Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";

export default defineProcedure({
  name: "keygate.deleteRootKey",
  audit: ["rootKey.delete"],
  body: Strict({ rootKeyId: Type.String({ minLength: 3, maxLength: 255, pattern: ID_PATTERN }) }),
  data: Type.Object({}),
  handler: async ({ body, caller, services }) => {
    await services.rootKeys.revokeFor(caller, body.rootKeyId);
    return {};
  },
});
