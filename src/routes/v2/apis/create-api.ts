import { Type } from "typebox";
import { NAME_PATTERN, Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";

export default defineProcedure({
  name: "apis.createApi",
  audit: ["api.create"],
  body: Strict({ name: Type.String({ minLength: 3, maxLength: 255, pattern: NAME_PATTERN }) }),
  data: Type.Object({ apiId: Type.String() }),
  handler: ({ body, caller, services }) => services.apis.createApi(caller, body),
});
