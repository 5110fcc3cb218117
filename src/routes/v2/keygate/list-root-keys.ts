import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defined } from "../../../lib/defined.js";
import { defineProcedure } from "../procedure.js";
import { RootKeyResponse } from "../schemas.js";

export default defineProcedure({
  name: "keygate.listRootKeys",
  audit: "none",
  body: Strict({}),
  data: Type.Array(RootKeyResponse),
  handler: async ({ caller, services }) =>
    (await services.rootKeys.listFor(caller)).map((record) => ({
      rootKeyId: record.id,
      permissions: record.permissions,
      createdAt: record.createdAt,
      ...defined({ name: record.name, expires: record.expires, revokedAt: record.revokedAt }),
    })),
});
