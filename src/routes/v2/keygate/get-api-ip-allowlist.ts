import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { ApiId } from "../schemas.js";

/** Keygate's own: the IP allowlist of an API, empty when its keys may be verified from anywhere. */
export default defineProcedure({
  name: "keygate.getApiIpAllowlist",
  audit: "none",
  body: Strict({ apiId: ApiId }),
  data: Type.Object({ apiId: Type.String(), ipAllowlist: Type.Array(Type.String()) }),
  handler: ({ body, caller, services }) => services.apis.getIpAllowlist(caller, body),
});
