import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineListProcedure } from "../procedure.js";
import { ApiId, Cursor, ExternalId, KeyResponse, PageLimit } from "../schemas.js";

export default defineListProcedure({
  name: "apis.listKeys",
  audit: ["key.reveal"],
  body: Strict({
    apiId: ApiId,
    limit: PageLimit,
    cursor: Type.Optional(Cursor),
    externalId: Type.Optional(ExternalId),
    decrypt: Type.Boolean({ default: false }),
    /** Accepted for compatibility; listKeys always reads the store, so there is no cache to skip. */
    revalidateKeysCache: Type.Boolean({ default: false }),
  }),
  item: KeyResponse,
  handler: ({ body: { revalidateKeysCache: _ignored, ...body }, caller, services }) => services.keys.listKeys(caller, body),
});
