import { Type } from "typebox";
import { ID_PATTERN, Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";

export default defineProcedure({
  name: "apis.deleteApi",
  audit: ["api.delete"],
  body: Strict({ apiId: Type.String({ minLength: 8, maxLength: 255, pattern: ID_PATTERN }) }),
  data: Type.Object({}),
  handler: async ({ body, caller, services }) => {
    await services.apis.deleteApi(caller, body);
    return {};
  },
});
