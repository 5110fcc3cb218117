import { Type } from "typebox";
import type { ListOverridesInput } from "../../../domain/ratelimit/ratelimit-service.js";
import { Strict } from "../../../http/schemas.js";
import { definePaginatedProcedure } from "../procedure.js";
import { NamespaceField, OverrideData, overrideData } from "./wire.js";

/** `data` is an object holding `overrides`; the hosted service sends a bare array here (docs/decisions.md#overrides). */
export default definePaginatedProcedure({
  name: "ratelimit.listOverrides",
  audit: "none",
  aliases: ["ratelimits.listOverrides"],
  body: Strict({
    namespace: NamespaceField,
    /** The `pagination.cursor` of the previous page. */
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 1_024 })),
    /** Page size. */
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 10 })),
  }),
  data: Type.Object({ overrides: Type.Array(OverrideData) }),
  handler: async ({ body, caller, services }) => {
    const input: ListOverridesInput = { namespace: body.namespace, limit: body.limit ?? 10 };
    if (body.cursor !== undefined) input.cursor = body.cursor;
    const page = await services.ratelimit.listOverrides(caller, input);
    return {
      data: { overrides: page.overrides.map(overrideData) },
      // cursor first, as pagination() in domain/pagination.ts gives it to the other list procedures.
      pagination: page.cursor === undefined ? { hasMore: page.hasMore } : { cursor: page.cursor, hasMore: page.hasMore },
    };
  },
});
