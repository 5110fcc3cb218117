import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { MAX_IP_ALLOWLIST_ENTRIES } from "../../../lib/ip-allowlist.js";
import { defineProcedure } from "../procedure.js";
import { ApiId } from "../schemas.js";

/** Keygate's own (Unkey's v2 API has no IP allowlists): which addresses keys of an API may be verified from. */
export default defineProcedure({
  name: "keygate.setApiIpAllowlist",
  audit: ["api.update"],
  body: Strict({
    apiId: ApiId,
    /** IPv4/IPv6 addresses and CIDR ranges; [] lets every address in again. */
    ipAllowlist: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: MAX_IP_ALLOWLIST_ENTRIES }),
  }),
  data: Type.Object({ apiId: Type.String(), ipAllowlist: Type.Array(Type.String()) }),
  handler: ({ body, caller, services }) => services.apis.setIpAllowlist(caller, body),
});
