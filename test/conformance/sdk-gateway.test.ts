import t from "tap";
import { startUpstream } from "../helpers/upstream.js";
import { sdkApp } from "./helpers.js";

// The official SDK's gateway methods against keygate: `app` names a route; project and environment are accepted.

t.test("the SDK lists, replaces and updates a route's policies through gateway.*", async (t) => {
  const upstream = await startUpstream(t);
  const { h, unkey } = await sdkApp(t);
  const apiId = (await unkey.apis.createApi({ name: "orders" })).data.apiId;
  const created = await h.call("keygate.createRoute", { name: "orders", match: { prefix: "/orders" }, upstream: upstream.url });
  t.equal(created.status, 200);
  const deployment = { project: "proj_keygate", app: "orders", environment: "production" };

  t.same((await unkey.gateway.listPolicies(deployment)).data, [], "a new route has no policies");
  await unkey.gateway.setPolicies({
    ...deployment,
    policies: [
      {
        name: "Block internal paths",
        enabled: true,
        match: [{ path: { path: { prefix: "/orders/internal/" } } }],
        firewall: { action: "ACTION_DENY" },
      },
      { name: "API keys", enabled: true, keyauth: { keyspaces: [apiId], locations: [{ bearer: {} }], credits: 0 } },
      { name: "Per IP", enabled: true, ratelimit: { limit: 100, windowMs: 60_000, identifier: { remoteIp: {} } } },
    ],
  });
  const listed = (await unkey.gateway.listPolicies(deployment)).data;
  t.same(
    listed.map((policy) => policy.name),
    ["Block internal paths", "API keys", "Per IP"],
    "in evaluation order",
  );
  t.same(listed[2]?.ratelimit?.identifiers, [{ remoteIp: {} }], "the deprecated identifier is answered as identifiers");

  const blockId = listed[0]?.id as string;
  await unkey.gateway.updatePolicy({ ...deployment, policyId: blockId, enabled: false, match: null });
  const updated = (await unkey.gateway.listPolicies(deployment)).data;
  t.match(updated[0], { id: blockId, name: "Block internal paths", enabled: false, firewall: { action: "ACTION_DENY" } });
  t.equal(updated[0]?.match, undefined, "match: null removes the expressions");

  await unkey.gateway.updatePolicy({ ...deployment, policyId: blockId, logging: { requestHeaders: true } });
  const switched = (await unkey.gateway.listPolicies(deployment)).data[0];
  t.match(switched, { id: blockId, logging: { requestHeaders: true } }, "a rule given replaces the rule");
  t.equal(switched?.firewall, undefined);

  const missing = await unkey.gateway.listPolicies({ ...deployment, app: "nope" }).catch((error: unknown) => error);
  t.equal((missing as { statusCode?: number }).statusCode, 404, "an unknown app is 404");
});
