import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";

export default defineProcedure({
  name: "keygate.listApis",
  body: Strict({}),
  data: Type.Array(Type.Object({ id: Type.String(), name: Type.String() })),
  handler: ({ caller, services }) => services.apis.listApis(caller),
});
