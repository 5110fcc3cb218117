import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineListProcedure } from "../procedure.js";
import { Cursor, IdentityWithCreditsResponse, PageLimit, Search } from "../schemas.js";

export default defineListProcedure({
  name: "identities.listIdentities",
  audit: "none",
  body: Strict({ limit: PageLimit, cursor: Type.Optional(Cursor), search: Type.Optional(Search) }),
  item: IdentityWithCreditsResponse,
  handler: ({ body, caller, services }) => services.identities.listIdentities(caller, body),
});
