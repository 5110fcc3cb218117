import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";

/** Needs no root key: the code is the credential. */
export default defineProcedure({
  name: "portal.exchangeCode",
  audit: ["portal.exchange_code"],
  noStore: true,
  body: Strict({ code: Type.String({ minLength: 1, maxLength: 128 }) }),
  data: Type.Object({ accessToken: Type.String(), expiresAt: Type.Integer() }),
  handler: async ({ body, services, requestId, clientAddress, userAgent }) => {
    const context = { requestId, clientAddress, userAgent };
    const { accessToken, expiresAt } = await services.portals.sessions.exchangeCode(body.code, undefined, context);
    return { accessToken, expiresAt };
  },
});
