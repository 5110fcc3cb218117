import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineListProcedure } from "../procedure.js";
import { Cursor, PageLimit, PermissionResponse, Search } from "../schemas.js";

export default defineListProcedure({
  name: "permissions.listPermissions",
  audit: "none",
  body: Strict({ cursor: Type.Optional(Cursor), limit: PageLimit, search: Type.Optional(Search) }),
  item: PermissionResponse,
  handler: ({ body, caller, services }) => services.rbac.listPermissions(caller, body),
});
