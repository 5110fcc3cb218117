import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineListProcedure } from "../procedure.js";
import { Cursor, PageLimit, RoleResponse, Search } from "../schemas.js";

export default defineListProcedure({
  name: "permissions.listRoles",
  audit: "none",
  body: Strict({ limit: PageLimit, cursor: Type.Optional(Cursor), search: Type.Optional(Search) }),
  item: RoleResponse,
  handler: ({ body, caller, services }) => services.rbac.listRoles(caller, body),
});
