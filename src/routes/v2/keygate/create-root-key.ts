import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { Expires, RootKeyPermission } from "../schemas.js";

export default defineProcedure({
  name: "keygate.createRootKey",
  audit: ["rootKey.create"],
  body: Strict({
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    permissions: Type.Array(RootKeyPermission, { minItems: 1, maxItems: 1000 }),
    expires: Type.Optional(Expires),
  }),
  data: Type.Object({ rootKeyId: Type.String(), key: Type.String() }),
  handler: async ({ body, caller, services }) => {
    const { id, key } = await services.rootKeys.createFor(caller, body);
    return { rootKeyId: id, key };
  },
});
