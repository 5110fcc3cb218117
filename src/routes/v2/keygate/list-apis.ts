import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";

export default defineProcedure({
  name: "keygate.listApis",
  audit: "none",
  body: Strict({}),
  // The key space id is what analytics rows name the API by (key_space_id).
  data: Type.Array(Type.Object({ id: Type.String(), name: Type.String(), keySpaceId: Type.String() })),
  handler: ({ caller, services }) => services.apis.listApis(caller),
});
