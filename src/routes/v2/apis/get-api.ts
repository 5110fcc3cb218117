import { Type } from "typebox";
import { ID_PATTERN, Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";

export default defineProcedure({
  name: "apis.getApi",
  audit: "none",
  body: Strict({ apiId: Type.String({ minLength: 8, maxLength: 255, pattern: ID_PATTERN }) }),
  data: Type.Object({ id: Type.String(), name: Type.String() }),
  handler: ({ body, caller, services }) => services.apis.getApi(caller, body),
});
