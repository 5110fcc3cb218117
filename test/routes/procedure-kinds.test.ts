import t from "tap";
import { Type } from "typebox";
import { defineListProcedure, definePaginatedProcedure, defineProcedure } from "../../src/routes/v2/procedure.js";

// Every kind of procedure keeps what its definition declares: name, aliases and the problem+json error media type.

const body = Type.Object({});

t.test("plain, paginated and list procedures all keep problemJsonErrors and aliases", async (t) => {
  const common = { name: "things.doIt", aliases: ["thing.doIt"], problemJsonErrors: true, audit: "none" as const, body };
  const kinds = {
    plain: defineProcedure({ ...common, data: Type.Null(), handler: async () => null }),
    paginated: definePaginatedProcedure({
      ...common,
      data: Type.Null(),
      handler: async () => ({ data: null, pagination: { hasMore: false } }),
    }),
    list: defineListProcedure({ ...common, item: Type.Null(), handler: async () => ({ items: [], pagination: { hasMore: false } }) }),
  };
  for (const [kind, procedure] of Object.entries(kinds)) {
    t.equal(procedure.problemJsonErrors, true, `${kind}: problem+json errors kept`);
    t.same(procedure.aliases, ["thing.doIt"], `${kind}: aliases kept`);
  }
  const plainErrors = definePaginatedProcedure({
    name: "things.list",
    audit: "none",
    body,
    data: Type.Null(),
    handler: async () => ({ data: null, pagination: { hasMore: false } }),
  });
  t.equal(plainErrors.problemJsonErrors, undefined, "left out when not asked for");
});
