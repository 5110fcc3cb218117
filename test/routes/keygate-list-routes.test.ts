import t from "tap";
import { assertError, checkUnauthenticated } from "../helpers/assertions.js";
import { harness, OTHER_ROOT_KEY } from "../helpers/harness.js";

const CONFIG = {
  apis: [
    { id: "api_orders", name: "orders", workspaceId: "ws_test" },
    { id: "api_billing", name: "billing", workspaceId: "ws_test" },
    { id: "api_theirs", name: "theirs", workspaceId: "ws_other" },
  ],
  routes: [
    {
      name: "orders",
      match: { prefix: "/orders", methods: ["GET", "POST"] },
      upstream: "http://user:secret@127.0.0.1:9/base",
      apiId: "api_orders",
      permissions: "orders.read",
      credits: { cost: 2 },
      ratelimits: [{ name: "requests", cost: 1 }],
    },
    { name: "billing", match: { prefix: "/billing" }, upstream: "http://127.0.0.1:9", apiId: "api_billing" },
    { name: "theirs", match: { prefix: "/theirs" }, upstream: "http://127.0.0.1:9", apiId: "api_theirs" },
  ],
};

t.test("keygate.listRoutes", async (t) => {
  const h = await harness(t, { config: CONFIG });

  await t.test("lists the routes in front of the workspace's APIs with their policies, credentials masked", async (t) => {
    const listed = await h.call("keygate.listRoutes", {});
    t.equal(listed.status, 200);
    const byName = new Map(listed.body.data.map((route: { name: string }) => [route.name, route]));
    t.same([...byName.keys()].sort(), ["billing", "orders"]);
    t.match(byName.get("orders"), {
      id: "config_route_orders",
      source: "config",
      match: { prefix: "/orders", methods: ["GET", "POST"] },
      policies: [
        {
          name: "keyauth",
          enabled: true,
          keyauth: {
            keyspaces: ["api_orders"],
            locations: [{ bearer: {} }],
            permissionQuery: "orders.read",
            credits: 2,
            ratelimits: [{ name: "requests", cost: 1 }],
          },
        },
      ],
    });
    t.equal((byName.get("orders") as { upstream: string }).upstream, "http://user:***@127.0.0.1:9/base");
    t.notMatch(JSON.stringify(listed.body), "secret");
    t.equal(
      (byName.get("billing") as { upstream: string }).upstream,
      "http://127.0.0.1:9",
      "an upstream without credentials as configured",
    );
    const theirs = await h.call("keygate.listRoutes", {}, { rootKey: OTHER_ROOT_KEY });
    t.same(
      theirs.body.data.map((route: { name: string }) => route.name),
      ["theirs"],
    );
  });

  await t.test("a root key reading one route sees it alone; one reading none is refused", async (t) => {
    const one = await h.rootKey(["gateway.config_route_billing.read_route"]);
    t.same(
      (await h.call("keygate.listRoutes", {}, { rootKey: one })).body.data.map((route: { name: string }) => route.name),
      ["billing"],
    );
    assertError(
      t,
      await h.call("keygate.listRoutes", {}, { rootKey: await h.rootKey(["api.*.create_key"]) }),
      "err:unkey:authorization:insufficient_permissions",
    );
  });

  await checkUnauthenticated(t, h, "keygate.listRoutes", {});
});
