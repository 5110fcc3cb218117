import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { KeyResponse } from "../schemas.js";

export default defineProcedure({
  name: "keys.whoami",
  audit: "none",
  body: Strict({ key: Type.String({ minLength: 1, maxLength: 512 }) }),
  data: KeyResponse,
  handler: ({ body, caller, services }) => services.keys.whoami(caller, body),
});
