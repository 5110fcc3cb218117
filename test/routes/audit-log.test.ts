import { createHash } from "node:crypto";
import t, { type Test } from "tap";
import type { AuditEntry } from "../../src/domain/audit/audit-trail.js";
import { hashKey } from "../../src/lib/hash.js";
import { PROCEDURES } from "../../src/routes/v2/index.js";
import { analyticsDir } from "../helpers/analytics.js";
import { assertError } from "../helpers/assertions.js";
import { TEST_VAULT_KEY } from "../helpers/fixtures.js";
import { type Harness, harness, OTHER_ROOT_KEY, ROOT_KEY, WORKSPACE } from "../helpers/harness.js";

/**
 * The audit log over HTTP: every write procedure, called once, makes exactly one entry naming the root key, the
 * action, the resources and what changed; reads and refused writes make none; no entry holds a secret; and a
 * workspace reads only its own entries. Analytics is off here (the log kept in memory); the engine's table is
 * tested in test/analytics/audit-log-engine.test.ts.
 */

const READ_VERB = /^(get|list|verify|whoami|limit|multiLimit)/;
const WRITES = PROCEDURES.filter((procedure) => !READ_VERB.test(procedure.name.split(".")[1] ?? ""));

const DEPLOYMENT = { project: "proj_keygate", app: "orders", environment: "production" };
const OPENAPI = '{"openapi":"3.0.3","info":{"title":"orders","version":"1"},"paths":{}}';
const LEGACY_KEY = "legacy_0123456789abcdef";
/** A receiver's own token in its URL's path: never in an entry. */
const WEBHOOK_PATH_TOKEN = "tok_receiver_5ecret";

interface Step {
  procedure: string;
  body: () => Record<string, unknown>;
  /** Resources (type:id) the entry must name, besides checks of its own. */
  check?: (t: Test, entry: AuditEntry, data: any) => void;
  /** Plaintext secrets the answer gave, which no entry may hold. */
  secrets?: (data: any) => string[];
}

async function entries(h: Harness, workspaceId = WORKSPACE): Promise<AuditEntry[]> {
  return h.app.analytics.audit.list({ workspaceId, limit: 1_000_000 });
}

const has = (entry: AuditEntry, type: string, id: string) => entry.resources.some((r) => r.type === type && r.id === id);
const change = (entry: AuditEntry, field: string) => entry.changes.find((c) => c.field === field);

t.test("every write procedure records exactly one entry, and no entry holds a secret", async (t) => {
  const h = await harness(t, {
    config: {
      vault: { key: TEST_VAULT_KEY },
      migrations: [{ id: "legacy", workspaceId: WORKSPACE, scheme: "sha256-hex" }],
      // Usage reports are made from analytics (keygate.replayUsageReports).
      analytics: { engine: "embedded", path: analyticsDir(t) },
      webhooks: { deliver: false },
    },
  });
  const ids: Record<string, string> = {};
  const secrets: string[] = [ROOT_KEY, TEST_VAULT_KEY, LEGACY_KEY, WEBHOOK_PATH_TOKEN];

  const steps: Step[] = [
    {
      procedure: "apis.createApi",
      body: () => ({ name: "audited" }),
      check: (t, entry, data) => {
        ids.apiId = data.apiId;
        t.ok(has(entry, "api", data.apiId));
        t.same(change(entry, "name"), { field: "name", old: null, new: "audited" });
      },
    },
    {
      procedure: "keygate.setApiIpAllowlist",
      body: () => ({ apiId: ids.apiId, ipAllowlist: ["10.0.0.0/8"] }),
      check: (t, entry) => t.same(change(entry, "ipAllowlist"), { field: "ipAllowlist", old: [], new: ["10.0.0.0/8"] }),
    },
    {
      procedure: "portal.createPortal",
      body: () => ({ slug: "audited", displayName: "Audited", mapping: { type: "keyspace", id: ids.apiId } }),
      check: (t, entry, data) => {
        ids.portalId = data.portalId;
        t.ok(has(entry, "portal", data.portalId));
        t.same(change(entry, "slug"), { field: "slug", old: null, new: "audited" });
      },
    },
    {
      procedure: "portal.updatePortal",
      body: () => ({ portal: "audited", displayName: "Audited portal" }),
      check: (t, entry) => t.same(change(entry, "displayName"), { field: "displayName", old: "Audited", new: "Audited portal" }),
    },
    {
      procedure: "portal.createSession",
      body: () => ({ portal: "audited", externalId: "customer_1", scopes: ["keys:read"] }),
      secrets: (data) => [new URL(data.url).searchParams.get("code") as string],
      check: (t, entry) => {
        t.ok(has(entry, "portal", ids.portalId as string));
        t.same(change(entry, "externalId"), { field: "externalId", old: null, new: "customer_1" });
      },
    },
    {
      procedure: "portal.deletePortal",
      body: () => ({ portal: "audited" }),
      check: (t, entry) => t.ok(has(entry, "portal", ids.portalId as string)),
    },
    {
      procedure: "keys.createKey",
      body: () => ({ apiId: ids.apiId, name: "k1", recoverable: true, externalId: "user_a", credits: { remaining: 10 } }),
      secrets: (data) => [data.key],
      check: (t, entry, data) => {
        ids.keyId = data.keyId;
        t.ok(has(entry, "key", data.keyId) && has(entry, "api", ids.apiId as string) && entry.resources.some((r) => r.type === "identity"));
        t.same(change(entry, "name")?.new, "k1");
        t.same(change(entry, "recoverable")?.new, true);
      },
    },
    {
      procedure: "keys.getKey",
      body: () => ({ keyId: ids.keyId, decrypt: true }),
      check: (t, entry) => t.ok(has(entry, "key", ids.keyId as string), "a reveal names the key"),
    },
    {
      procedure: "apis.listKeys",
      body: () => ({ apiId: ids.apiId, decrypt: true }),
      check: (t, entry) => t.ok(has(entry, "key", ids.keyId as string)),
    },
    {
      procedure: "keys.updateKey",
      body: () => ({ keyId: ids.keyId, name: "k1b", enabled: false, meta: { plan: "pro" } }),
      check: (t, entry) => {
        t.same(change(entry, "name"), { field: "name", old: "k1", new: "k1b" });
        t.same(change(entry, "enabled"), { field: "enabled", old: true, new: false });
        t.same(change(entry, "meta"), { field: "meta", old: null, new: { plan: "pro" } });
        t.equal(entry.changes.length, 3, "only what changed");
      },
    },
    {
      procedure: "keys.updateCredits",
      body: () => ({ keyId: ids.keyId, operation: "set", value: 5 }),
      check: (t, entry) => t.match(change(entry, "credits"), { old: { remaining: 10 }, new: { remaining: 5 } }),
    },
    {
      procedure: "permissions.createPermission",
      body: () => ({ name: "docs.write", slug: "docs.write" }),
      check: (t, entry, data) => t.ok(has(entry, "permission", data.permissionId)),
    },
    {
      procedure: "permissions.createRole",
      body: () => ({ name: "editor" }),
      check: (t, entry, data) => {
        ids.roleId = data.roleId;
        t.ok(has(entry, "role", data.roleId));
      },
    },
    {
      procedure: "permissions.setRolePermissions",
      body: () => ({ roleId: ids.roleId, permissions: ["docs.write"] }),
      check: (t, entry) => t.same(change(entry, "permissions"), { field: "permissions", old: [], new: ["docs.write"] }),
    },
    {
      procedure: "keys.addPermissions",
      body: () => ({ keyId: ids.keyId, permissions: ["docs.write"] }),
      check: (t, entry) => t.same(change(entry, "permissions"), { field: "permissions", old: [], new: ["docs.write"] }),
    },
    {
      procedure: "keys.removePermissions",
      body: () => ({ keyId: ids.keyId, permissions: ["docs.write"] }),
      check: (t, entry) => t.same(change(entry, "permissions"), { field: "permissions", old: ["docs.write"], new: [] }),
    },
    {
      procedure: "keys.setPermissions",
      body: () => ({ keyId: ids.keyId, permissions: ["docs.write", "docs.read"] }),
      check: (t, entry) => t.same(change(entry, "permissions")?.new, ["docs.write", "docs.read"]),
    },
    {
      procedure: "keys.addRoles",
      body: () => ({ keyId: ids.keyId, roles: ["editor"] }),
      check: (t, entry) => t.same(change(entry, "roles"), { field: "roles", old: [], new: ["editor"] }),
    },
    {
      procedure: "keys.removeRoles",
      body: () => ({ keyId: ids.keyId, roles: ["editor"] }),
      check: (t, entry) => t.same(change(entry, "roles"), { field: "roles", old: ["editor"], new: [] }),
    },
    {
      procedure: "keys.setRoles",
      body: () => ({ keyId: ids.keyId, roles: ["editor"] }),
      check: (t, entry) => t.same(change(entry, "roles")?.new, ["editor"]),
    },
    {
      procedure: "keys.rerollKey",
      body: () => ({ keyId: ids.keyId, expiration: 0 }),
      secrets: (data) => [data.key],
      check: (t, entry, data) => {
        t.ok(has(entry, "key", ids.keyId as string) && has(entry, "key", data.keyId), "both keys");
        t.same(change(entry, "expires")?.old, null);
      },
    },
    {
      procedure: "keys.migrateKeys",
      body: () => ({ migrationId: "legacy", apiId: ids.apiId, keys: [{ hash: createHash("sha256").update(LEGACY_KEY).digest("hex") }] }),
      check: (t, entry, data) => t.ok(has(entry, "key", data.migrated[0].keyId)),
    },
    {
      procedure: "identities.createIdentity",
      body: () => ({ externalId: "user_b" }),
      check: (t, entry, data) => {
        ids.identityId = data.identityId;
        t.ok(has(entry, "identity", data.identityId));
      },
    },
    {
      procedure: "identities.updateIdentity",
      body: () => ({ identity: "user_b", meta: { tier: "gold" } }),
      check: (t, entry) => t.same(change(entry, "meta"), { field: "meta", old: null, new: { tier: "gold" } }),
    },
    {
      procedure: "keygate.updateIdentityCredits",
      body: () => ({ identity: "user_b", operation: "set", value: 100 }),
      check: (t, entry) => {
        t.ok(has(entry, "identity", ids.identityId as string));
        t.same(change(entry, "credits"), { field: "credits", old: null, new: { remaining: 100 } });
      },
    },
    {
      procedure: "keygate.createWebhook",
      body: () => ({ url: `https://hooks.example.com/in/${WEBHOOK_PATH_TOKEN}`, events: ["key.created"] }),
      secrets: (data) => [data.secret],
      check: (t, entry, data) => {
        ids.webhookId = data.webhookId;
        t.ok(has(entry, "webhook", data.webhookId));
        t.same(change(entry, "url"), { field: "url", old: null, new: "https://hooks.example.com" }, "the URL by its origin only");
      },
    },
    {
      procedure: "keygate.updateWebhook",
      body: () => ({ webhookId: ids.webhookId, events: ["key.created", "key.deleted"], description: "billing" }),
      check: (t, entry) => {
        t.same(change(entry, "events"), { field: "events", old: ["key.created"], new: ["key.created", "key.deleted"] });
        t.same(change(entry, "description"), { field: "description", old: null, new: "billing" });
        t.notOk(change(entry, "enabled"), "only what changed");
      },
    },
    {
      procedure: "keygate.rotateWebhookSecret",
      body: () => ({ webhookId: ids.webhookId }),
      secrets: (data) => [data.secret],
      check: (t, entry) => t.ok(has(entry, "webhook", ids.webhookId as string)),
    },
    {
      procedure: "keygate.testWebhook",
      body: () => ({ webhookId: ids.webhookId }),
      check: (t, entry) => t.ok(has(entry, "webhook", ids.webhookId as string)),
    },
    {
      procedure: "keygate.createWebhook",
      body: () => ({ url: "https://hooks.example.com/usage", events: ["usage.reported"], usagePeriod: "daily" }),
      secrets: (data) => [data.secret],
      check: (t, entry, data) => {
        ids.usageWebhookId = data.webhookId;
        t.same(change(entry, "usagePeriod"), { field: "usagePeriod", old: null, new: "daily" });
      },
    },
    {
      procedure: "keygate.replayUsageReports",
      body: () => ({ webhookId: ids.usageWebhookId, start: Date.now() - 3 * 86_400_000, end: Date.now() - 2 * 86_400_000 }),
      check: (t, entry) => {
        t.ok(has(entry, "webhook", ids.usageWebhookId as string));
        t.match(entry.description, /Replayed 0 usage reports of \d daily periods/);
      },
    },
    {
      procedure: "keygate.deleteWebhook",
      body: () => ({ webhookId: ids.webhookId }),
      check: (t, entry) => t.same(change(entry, "events"), { field: "events", old: ["key.created", "key.deleted"], new: null }),
    },
    {
      procedure: "ratelimit.setOverride",
      body: () => ({ namespace: "api-calls", identifier: "user_b", limit: 10, duration: 60_000 }),
      check: (t, entry) => {
        t.ok(entry.resources.some((r) => r.type === "ratelimitNamespace"));
        t.same(change(entry, "limit"), { field: "limit", old: null, new: 10 });
      },
    },
    {
      procedure: "ratelimit.deleteOverride",
      body: () => ({ namespace: "api-calls", identifier: "user_b" }),
      check: (t, entry) => t.same(change(entry, "limit"), { field: "limit", old: 10, new: null }),
    },
    {
      procedure: "keygate.createRootKey",
      body: () => ({ name: "ci", permissions: ["api.*.read_api"] }),
      secrets: (data) => [data.key],
      check: (t, entry, data) => {
        ids.rootKeyId = data.rootKeyId;
        t.ok(has(entry, "rootKey", data.rootKeyId));
        t.same(change(entry, "permissions")?.new, ["api.*.read_api"]);
      },
    },
    {
      procedure: "keygate.deleteRootKey",
      body: () => ({ rootKeyId: ids.rootKeyId }),
      check: (t, entry) => t.ok(has(entry, "rootKey", ids.rootKeyId as string)),
    },
    {
      procedure: "keygate.createRoute",
      body: () => ({ name: "orders", match: { prefix: "/orders" }, upstream: "http://127.0.0.1:17301" }),
      check: (t, entry, data) => {
        ids.routeId = data.id;
        t.ok(has(entry, "route", data.id));
        t.same(change(entry, "match")?.new, { prefix: "/orders" });
      },
    },
    {
      procedure: "keygate.updateRoute",
      body: () => ({ route: "orders", timeoutMs: 5_000 }),
      check: (t, entry) => t.same(change(entry, "timeoutMs"), { field: "timeoutMs", old: null, new: 5_000 }),
    },
    {
      procedure: "keygate.setRoutePolicies",
      body: () => ({ route: "orders", policies: [{ name: "auth", enabled: true, keyauth: { keyspaces: [ids.apiId] } }] }),
      check: (t, entry, data) => {
        ids.policyId = data.policies[0].id;
        t.ok(change(entry, "policies"));
      },
    },
    {
      procedure: "keygate.updateRoutePolicy",
      body: () => ({ route: "orders", policyId: ids.policyId, enabled: false }),
      check: (t, entry) => t.ok(change(entry, "policies")),
    },
    {
      procedure: "gateway.setPolicies",
      body: () => ({ ...DEPLOYMENT, policies: [{ name: "auth", enabled: true, keyauth: { keyspaces: [ids.apiId] } }] }),
      check: (t, entry) => t.ok(has(entry, "route", ids.routeId as string)),
    },
    {
      procedure: "gateway.updatePolicy",
      body: () => ({ ...DEPLOYMENT, policyId: ids.policyId, enabled: true }),
      check: (t, entry) => t.ok(has(entry, "route", ids.routeId as string)),
    },
    {
      procedure: "keygate.setRouteOpenApi",
      body: () => ({ route: "orders", document: OPENAPI }),
      check: (t, entry) => t.ok(change(entry, "openApi"), "the upload is named, not the document"),
    },
    {
      procedure: "keygate.deleteRoute",
      body: () => ({ route: "orders" }),
      check: (t, entry) => t.ok(has(entry, "route", ids.routeId as string)),
    },
    {
      procedure: "identities.deleteIdentity",
      body: () => ({ identity: "user_b" }),
      check: (t, entry) => t.ok(has(entry, "identity", ids.identityId as string)),
    },
    { procedure: "keys.deleteKey", body: () => ({ keyId: ids.keyId }), check: (t, entry) => t.ok(has(entry, "key", ids.keyId as string)) },
    {
      procedure: "permissions.deleteRole",
      body: () => ({ role: "editor" }),
      check: (t, entry) => t.ok(has(entry, "role", ids.roleId as string)),
    },
    { procedure: "permissions.deletePermission", body: () => ({ permission: "docs.write" }) },
    { procedure: "apis.deleteApi", body: () => ({ apiId: ids.apiId }), check: (t, entry) => t.ok(has(entry, "api", ids.apiId as string)) },
  ];

  await t.test("the run covers every write procedure", async (t) => {
    const covered = new Set(steps.map((step) => step.procedure));
    for (const procedure of WRITES) {
      t.ok(covered.has(procedure.name), `${procedure.name} is in the run`);
      t.not(procedure.audit, "none", `${procedure.name} declares its audit actions`);
    }
  });

  // The namespace the override steps need exists once a limit was asked in it (a read: no entry).
  t.equal((await h.call("ratelimit.limit", { namespace: "api-calls", identifier: "user_b", limit: 5, duration: 60_000 })).status, 200);
  t.same(await entries(h), [], "reads make no entry");

  for (const step of steps) {
    await t.test(step.procedure, async (t) => {
      const before = (await entries(h)).length;
      const result = await h.call(step.procedure, step.body(), { headers: { "user-agent": "audit-test/1.0" } });
      t.equal(result.status, 200, JSON.stringify(result.body?.error ?? ""));
      const all = await entries(h);
      t.equal(all.length, before + 1, "exactly one entry");
      const entry = all[0] as AuditEntry;
      const procedure = PROCEDURES.find((each) => each.name === step.procedure);
      t.ok(procedure && procedure.audit !== "none" && procedure.audit.includes(entry.action), `${entry.action} is declared`);
      t.same(entry.actor, { type: "root_key", id: "config_root_key_0", name: "" });
      t.equal(entry.workspaceId, WORKSPACE);
      t.equal(entry.requestId, result.body.meta.requestId);
      t.equal(entry.userAgent, "audit-test/1.0");
      t.equal(entry.clientAddress, "127.0.0.1");
      t.ok(entry.description.length > 0);
      step.check?.(t, entry, result.body.data);
      secrets.push(...(step.secrets?.(result.body.data) ?? []));
    });
  }

  await t.test("no entry holds a key, a root key or its hash, nor the vault key", async (t) => {
    const text = JSON.stringify(await entries(h));
    t.ok(secrets.length >= 6);
    for (const secret of secrets) {
      t.notOk(text.includes(secret), "no plaintext");
      t.notOk(text.includes(hashKey(secret)), "no hash");
    }
    t.notOk(text.includes(createHash("sha256").update(LEGACY_KEY).digest("hex")), "no imported hash");
  });

  await t.test("listAuditLogs answers the same entries newest first, and filters them", async (t) => {
    const all = await entries(h);
    const page = await h.call("keygate.listAuditLogs", { limit: 100 });
    t.equal(page.status, 200);
    t.same(
      page.body.data.map((entry: { auditLogId: string }) => entry.auditLogId),
      all.slice(0, 100).map((entry) => entry.id),
    );
    t.match(page.body.data[0], { action: "api.delete", context: { userAgent: "audit-test/1.0" } });
    const ofKey = await h.call("keygate.listAuditLogs", { resourceType: "key", resourceId: ids.keyId });
    t.same(
      ofKey.body.data.map((entry: { action: string }) => entry.action).reverse(),
      [
        "key.create",
        "key.reveal",
        "key.reveal",
        "key.update",
        "key.update",
        "authorization.connect_permission_and_key",
        "authorization.disconnect_permission_and_key",
        "key.update",
        "authorization.connect_role_and_key",
        "authorization.disconnect_role_and_key",
        "key.update",
        "key.reroll",
        "key.delete",
      ],
      "a key's history",
    );
    const byAction = await h.call("keygate.listAuditLogs", { action: "rootKey.create" });
    t.equal(byAction.body.data.length, 1);
    t.equal((await h.call("keygate.listAuditLogs", { actorId: "config_root_key_0", limit: 1 })).body.data.length, 1);
    t.equal((await h.call("keygate.listAuditLogs", { actorType: "system" })).body.data.length, 0);
    t.equal((await h.call("keygate.listAuditLogs", { resourceType: "rootKey" })).body.data.length, 2);
    t.equal((await h.call("keygate.listAuditLogs", { resourceId: ids.apiId })).body.data.length > 5, true);
    const newest = all[0] as AuditEntry;
    const oldest = all.at(-1) as AuditEntry;
    t.equal((await h.call("keygate.listAuditLogs", { start: newest.time + 1 })).body.data.length, 0);
    t.equal((await h.call("keygate.listAuditLogs", { end: oldest.time - 1 })).body.data.length, 0);
  });

  await t.test("pages follow the cursor without repeats or gaps", async (t) => {
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const page = await h.call("keygate.listAuditLogs", { limit: 7, ...(cursor ? { cursor } : {}) });
      seen.push(...page.body.data.map((entry: { auditLogId: string }) => entry.auditLogId));
      if (!page.body.pagination.hasMore) break;
      cursor = page.body.pagination.cursor;
    }
    t.same(
      seen,
      (await entries(h)).map((entry) => entry.id),
    );
    const bad = await h.call("keygate.listAuditLogs", { cursor: "bm9wZQ" });
    assertError(t, bad, "err:unkey:application:invalid_input", /cursor/);
  });

  await t.test("another workspace's root key sees none of these entries", async (t) => {
    const other = await h.call("keygate.listAuditLogs", {}, { rootKey: OTHER_ROOT_KEY });
    t.equal(other.status, 200);
    t.same(other.body.data, []);
  });
});

t.test("refused writes make no entry; reading needs audit.*.read_audit_logs", async (t) => {
  const h = await harness(t);
  const invalid = await h.call("apis.createApi", { name: "x" });
  t.equal(invalid.status, 400);
  const weak = await h.rootKey(["api.*.read_api"]);
  const forbidden = await h.call("apis.createApi", { name: "orders" }, { rootKey: weak });
  t.equal(forbidden.status, 403);
  const missing = await h.call("keys.deleteKey", { keyId: "key_doesnotexist" });
  t.equal(missing.status, 404);
  t.same(await entries(h), [], "none of the three left an entry");

  assertError(
    t,
    await h.call("keygate.listAuditLogs", {}, { rootKey: weak }),
    "err:unkey:authorization:insufficient_permissions",
    /read_audit_logs/,
  );
  const reader = await h.rootKey(["audit.*.read_audit_logs"]);
  t.equal((await h.call("keygate.listAuditLogs", {}, { rootKey: reader })).status, 200);
  const invalidFilter = await h.call("keygate.listAuditLogs", { action: "key.explode" });
  t.equal(invalidFilter.status, 400);
});

t.test("a stored root key is named in its entries", async (t) => {
  const h = await harness(t);
  const created = await h.call("keygate.createRootKey", { name: "deployer", permissions: ["api.*.create_api"] });
  await h.call("apis.createApi", { name: "named" }, { rootKey: created.body.data.key });
  const [entry] = await entries(h);
  t.same(entry?.actor, { type: "root_key", id: created.body.data.rootKeyId, name: "deployer" });
});
