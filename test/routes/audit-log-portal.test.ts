import t from "tap";
import type { AuditEntry } from "../../src/domain/audit/audit-trail.js";
import { createApi } from "../helpers/fixtures.js";
import { harness, WORKSPACE } from "../helpers/harness.js";

// A customer's actions in a portal are recorded with the `portal` actor, named by their external id; the code and
// the session's token never are.

t.test("a portal session's actions are the customer's in the audit log", async (t) => {
  const h = await harness(t);
  const apiId = await createApi(h, "billing");
  t.equal(
    (await h.call("portal.createPortal", { slug: "acme", displayName: "Acme", mapping: { type: "keyspace", id: apiId } })).status,
    200,
  );
  const minted = await h.call("portal.createSession", { portal: "acme", externalId: "customer_7", scopes: ["keys:read", "keys:create"] });
  const code = new URL(minted.body.data.url).searchParams.get("code") as string;
  const exchanged = await h.call("portal.exchangeCode", { code }, { rootKey: null, headers: { "user-agent": "browser/1" } });
  t.equal(exchanged.status, 200);
  const token = exchanged.body.data.accessToken as string;
  const created = await h.call("portal.createKey", { apiId }, { rootKey: null, headers: { cookie: `portal_session=${token}` } });
  t.equal(created.status, 200, JSON.stringify(created.body?.error ?? ""));

  const entries: AuditEntry[] = await h.app.analytics.audit.list({ workspaceId: WORKSPACE, limit: 100 });
  const [keyCreated, opened] = entries;
  t.equal(keyCreated?.action, "key.create");
  t.same(keyCreated?.actor, { type: "portal", id: "customer_7", name: "" }, "the key the customer made is theirs");
  t.ok(keyCreated?.resources.some((resource) => resource.type === "key" && resource.id === created.body.data.keyId));
  t.equal(opened?.action, "portal.exchange_code");
  t.same(opened?.actor, { type: "portal", id: "customer_7", name: "" });
  t.equal(opened?.userAgent, "browser/1");
  t.equal(opened?.requestId, exchanged.body.meta.requestId);
  t.equal(entries[2]?.action, "portal.create_session", "minted by the operator's root key");
  t.equal(entries[2]?.actor.type, "root_key");
  const text = JSON.stringify(entries);
  for (const secret of [code, token, created.body.data.key]) t.notOk(text.includes(secret), "no code, token or key");
});
