import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineListProcedure } from "../procedure.js";
import { Cursor, KeyResponse, PageLimit } from "../schemas.js";
import { sessionOf } from "./session.js";

/** KeyResponse plus keygate's usage fields (present with analytics on and a verification seen). */
const PortalKeyResponse = Type.Object({
  ...KeyResponse.properties,
  lastUsed: Type.Optional(Type.Integer()),
  verifications: Type.Optional(Type.Integer()),
});

export default defineListProcedure({
  name: "portal.listKeys",
  audit: "none",
  body: Strict({ limit: PageLimit, cursor: Type.Optional(Cursor) }),
  item: PortalKeyResponse,
  handler: (context) => context.services.portals.customers.listKeys(sessionOf(context), context.body),
});
