import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";

export default defineProcedure({
  name: "keygate.listRatelimitNamespaces",
  audit: "none",
  body: Strict({}),
  data: Type.Array(Type.Object({ id: Type.String(), name: Type.String(), createdAt: Type.Integer() })),
  handler: ({ caller, services }) => services.ratelimit.listLiveNamespaces(caller),
});
