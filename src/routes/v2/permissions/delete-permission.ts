import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { Empty } from "../schemas.js";

export default defineProcedure({
  name: "permissions.deletePermission",
  body: Strict({ permission: Type.String({ minLength: 1, maxLength: 255 }) }),
  data: Empty,
  handler: async ({ body, caller, services }) => {
    await services.rbac.deletePermission(caller, body);
    return {};
  },
});
