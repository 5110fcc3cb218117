import t, { type Test } from "tap";
import type { Verification } from "../../../src/domain/verification/verification.js";
import { createApi, createKey } from "../../helpers/fixtures.js";
import { harness } from "../../helpers/harness.js";

// Cached key views share what keys have in common (ids, permission sets, roles, identities), and a change to a
// shared value reaches every key that holds it.

async function setup(t: Test) {
  const h = await harness(t);
  const apiId = await createApi(h);
  const services = h.app.services;
  const view = async (key: string) => {
    const verification: Verification = await services.verification.verify({
      requestId: "req_share",
      source: "api",
      workspaceId: "ws_test",
      key,
    });
    if (!verification.key) throw new Error(`no key: ${verification.code}`);
    return verification.key;
  };
  return { h, apiId, view };
}

t.test("keys with the same permissions, roles and identity share one copy of each", async (t) => {
  const { h, apiId, view } = await setup(t);
  await h.call("permissions.createPermission", { name: "read", slug: "orders.read" });
  await h.call("permissions.createRole", { name: "reader", permissions: ["orders.read"] });
  const fields = { permissions: ["orders.read"], roles: ["reader"], externalId: "customer_1" };
  const a = await view((await createKey(h, apiId, fields)).key);
  const b = await view((await createKey(h, apiId, fields)).key);
  const other = await view((await createKey(h, apiId, { permissions: ["orders.write"] })).key);
  t.not(a.keyId, b.keyId);
  t.equal(a.permissionSet, b.permissionSet, "one permission set");
  t.equal(a.shown.permissions, b.shown.permissions, "one list of permission names");
  t.equal(a.shown.roles, b.shown.roles, "one list of role names");
  t.equal(a.identity, b.identity, "one identity");
  t.equal(a.shown.identity, b.shown.identity, "one identity as shown");
  t.equal(a.apiId, other.apiId);
  t.not(a.permissionSet, other.permissionSet, "other permissions, another set");
  t.ok(Object.isFrozen(a.shown.permissions) && Object.isFrozen(a.shown.identity), "shared values cannot be changed in place");
  t.ok(other.permissionSet.has("orders.write") && !other.permissionSet.has("orders.read"));
});

t.test("an identity changed afterwards is shown changed for every key of it, never the shared copy from before", async (t) => {
  const { h, apiId, view } = await setup(t);
  const first = await createKey(h, apiId, { externalId: "customer_2" });
  const second = await createKey(h, apiId, { externalId: "customer_2" });
  t.same((await view(first.key)).shown.identity?.meta, undefined);
  const updated = await h.call("identities.updateIdentity", { identity: "customer_2", meta: { plan: "pro" } });
  t.equal(updated.status, 200);
  t.same((await view(first.key)).shown.identity?.meta, { plan: "pro" });
  t.same((await view(second.key)).shown.identity?.meta, { plan: "pro" });
  t.equal((await view(first.key)).shown.identity, (await view(second.key)).shown.identity, "shared again, as changed");
});
