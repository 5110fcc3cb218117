import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";

/** Needs no root key: the code is the credential. */
export default defineProcedure({
  name: "portal.exchangeCode",
  noStore: true,
  body: Strict({ code: Type.String({ minLength: 1, maxLength: 128 }) }),
  data: Type.Object({ accessToken: Type.String(), expiresAt: Type.Integer() }),
  handler: async ({ body, services }) => {
    const { accessToken, expiresAt } = await services.portals.sessions.exchangeCode(body.code);
    return { accessToken, expiresAt };
  },
});
