import { Type } from "typebox";
import { Strict } from "../../../http/schemas.js";
import { defineProcedure } from "../procedure.js";
import { KeyId } from "../schemas.js";
import { sessionOf } from "./session.js";

const Counts = {
  total: Type.Integer(),
  valid: Type.Integer(),
  rateLimited: Type.Integer(),
  insufficientPermissions: Type.Integer(),
  forbidden: Type.Integer(),
  disabled: Type.Integer(),
  expired: Type.Integer(),
  usageExceeded: Type.Integer(),
};

const Time = Type.Integer({ minimum: 0, maximum: 4_102_444_800_000 });

export default defineProcedure({
  name: "portal.getVerifications",
  audit: "none",
  body: Strict({
    startTime: Time,
    endTime: Time,
    keyId: Type.Optional(KeyId),
    /** keygate's: each bucket also counts per key. */
    byKey: Type.Boolean({ default: false }),
  }),
  data: Type.Array(
    Type.Object({ time: Type.Integer(), ...Counts, keys: Type.Optional(Type.Array(Type.Object({ keyId: Type.String(), ...Counts }))) }),
  ),
  handler: (context) => context.services.portals.customers.getVerifications(sessionOf(context), context.body),
});
