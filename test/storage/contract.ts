import type { Test } from "tap";
import type { AuditOutbox } from "../../src/storage/audit-outbox-interfaces.js";
import type { WindowCheck } from "../../src/storage/counter-interfaces.js";
import type { Stores } from "../../src/storage/interfaces.js";
import type {
  ApiRecord,
  CreditRecord,
  IdentityRecord,
  KeyRecord,
  PermissionRecord,
  RatelimitNamespaceRecord,
  RatelimitOverrideRecord,
  RoleRecord,
  RootKeyRecord,
} from "../../src/storage/records.js";
import { keyRecord } from "../helpers/records.js";
import { auditOutboxContract } from "./audit-outbox-contract.js";
import { portalStoreContract } from "./portal-store-contract.js";
import { routeStoreContract } from "./route-store-contract.js";
import { usageReportStoreContract } from "./usage-report-store-contract.js";
import { webhookStoreContract } from "./webhook-store-contract.js";

/**
 * The behaviour every Stores implementation must have. Run by memory.test.ts, redis-store-contract.test.ts,
 * redis-cluster-stores.test.ts and redis-sentinel-stores.test.ts; a store is correct when it passes here, whatever
 * it keeps underneath. The route store's part is in route-store-contract.ts.
 */
export async function storeContract(t: Test, open: (t: Test) => Promise<Stores>): Promise<void> {
  const rootKey = (id: string, hash: string, workspaceId = "ws_a"): RootKeyRecord => ({
    id,
    hash,
    workspaceId,
    permissions: ["api.*.read_api"],
    createdAt: 1_000,
  });
  const api = (id: string, workspaceId = "ws_a"): ApiRecord => ({
    id,
    workspaceId,
    name: `name-${id}`,
    keySpaceId: `ks_${id}`,
    createdAt: 2_000,
    deleteProtection: false,
  });

  await t.test("root keys: create, find by hash, list, revoke", async (t) => {
    const stores = await open(t);
    const record = { ...rootKey("key_1", "hash-1"), name: "ci", expires: 9_999 };
    t.equal(await stores.rootKeys.create(record), true);
    t.same(await stores.rootKeys.findByHash("hash-1"), record, "reads back exactly what was written");
    t.equal(await stores.rootKeys.findByHash("hash-2"), null);
    t.equal(await stores.rootKeys.create(rootKey("key_1", "hash-other")), false, "same id refused");
    t.equal(await stores.rootKeys.create(rootKey("key_other", "hash-1")), false, "same hash refused");
    t.same(await stores.rootKeys.findByHash("hash-other"), null, "a refused create writes nothing");
    await stores.rootKeys.create(rootKey("key_0", "hash-0", "ws_b"));
    t.same(
      (await stores.rootKeys.list()).map((r) => r.id),
      ["key_0", "key_1"],
      "listed by id",
    );
    t.same(
      (await stores.rootKeys.list("ws_b")).map((r) => r.id),
      ["key_0"],
      "filtered by workspace",
    );
    const revoked = await stores.rootKeys.revoke("key_1", 5_000);
    t.equal(revoked?.revokedAt, 5_000);
    t.equal((await stores.rootKeys.findByHash("hash-1"))?.revokedAt, 5_000, "revocation is stored");
    t.equal(await stores.rootKeys.revoke("key_1", 6_000), null, "revoking twice finds no live key");
    t.equal(await stores.rootKeys.revoke("key_missing", 6_000), null);
  });

  await t.test("root keys: records returned are copies", async (t) => {
    const stores = await open(t);
    await stores.rootKeys.create(rootKey("key_1", "hash-1"));
    const read = (await stores.rootKeys.findByHash("hash-1")) as RootKeyRecord;
    read.permissions.push("*");
    t.same((await stores.rootKeys.findByHash("hash-1"))?.permissions, ["api.*.read_api"]);
  });

  await t.test("apis: create, get within the workspace only, owner lookup", async (t) => {
    const stores = await open(t);
    t.equal(await stores.apis.create(api("api_1")), true);
    t.same(await stores.apis.get("ws_a", "api_1"), api("api_1"));
    t.equal(await stores.apis.get("ws_b", "api_1"), null, "another workspace does not see it");
    t.equal(await stores.apis.workspaceOf("api_1"), "ws_a");
    t.equal(await stores.apis.workspaceOf("api_2"), null);
    t.equal(await stores.apis.create(api("api_1")), false, "an existing id is refused");
    t.equal(await stores.apis.create(api("api_1", "ws_b")), false, "also from another workspace");
    t.equal(await stores.apis.get("ws_b", "api_1"), null);
  });

  await t.test("apis: list gives the workspace's APIs by id, deleted ones included", async (t) => {
    const stores = await open(t);
    await stores.apis.create(api("api_2"));
    await stores.apis.create(api("api_1"));
    await stores.apis.create(api("api_3", "ws_b"));
    await stores.apis.markDeleted("ws_a", "api_2", 5_000);
    const listed = await stores.apis.list("ws_a");
    t.same(
      listed.map((record) => [record.id, record.deletedAt]),
      [
        ["api_1", undefined],
        ["api_2", 5_000],
      ],
    );
    t.same(await stores.apis.list("ws_none"), []);
  });

  await t.test("apis: markDeleted soft-deletes once", async (t) => {
    const stores = await open(t);
    await stores.apis.create(api("api_1"));
    t.equal((await stores.apis.markDeleted("ws_a", "api_1", 7_000))?.deletedAt, 7_000);
    t.equal((await stores.apis.get("ws_a", "api_1"))?.deletedAt, 7_000, "still readable, marked deleted");
    t.equal(await stores.apis.markDeleted("ws_a", "api_1", 8_000), null, "a second delete finds nothing live");
    t.equal(await stores.apis.markDeleted("ws_b", "api_1", 8_000), null, "nor does another workspace");
    t.equal(await stores.apis.markDeleted("ws_a", "api_missing", 8_000), null);
  });

  await t.test("apis: concurrent deletes of one API succeed exactly once", async (t) => {
    const stores = await open(t);
    await stores.apis.create(api("api_1"));
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => stores.apis.markDeleted("ws_a", "api_1", 10_000 + i)));
    t.equal(results.filter((result) => result !== null).length, 1);
  });

  await t.test("apis: the IP allowlist of a live API is replaced or removed", async (t) => {
    const stores = await open(t);
    await stores.apis.create(api("api_1"));
    const set = await stores.apis.setIpAllowlist("ws_a", "api_1", ["10.0.0.0/8", "2001:db8::/32"]);
    t.same(set?.ipAllowlist, ["10.0.0.0/8", "2001:db8::/32"]);
    t.same((await stores.apis.get("ws_a", "api_1"))?.ipAllowlist, ["10.0.0.0/8", "2001:db8::/32"]);
    t.equal(await stores.apis.setIpAllowlist("ws_b", "api_1", ["10.0.0.1"]), null, "another workspace");
    t.equal(await stores.apis.setIpAllowlist("ws_a", "api_missing", ["10.0.0.1"]), null, "absent");
    const removed = await stores.apis.setIpAllowlist("ws_a", "api_1", null);
    t.same(removed, api("api_1"), "null removes the field");
    t.same(await stores.apis.get("ws_a", "api_1"), api("api_1"));
    await stores.apis.markDeleted("ws_a", "api_1", 5);
    t.equal(await stores.apis.setIpAllowlist("ws_a", "api_1", ["10.0.0.1"]), null, "deleted");
  });

  await t.test("apis: concurrent creates of one id succeed exactly once", async (t) => {
    const stores = await open(t);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => stores.apis.create(api("api_1", i % 2 === 0 ? "ws_a" : "ws_b"))),
    );
    t.equal(results.filter(Boolean).length, 1);
  });

  const key = (id: string, overrides: Partial<KeyRecord> = {}): KeyRecord => ({
    id,
    workspaceId: "ws_a",
    apiId: "api_1",
    keySpaceId: "ks_1",
    hash: `hash-${id}`,
    start: "sk_ab12",
    prefix: "sk",
    byteLength: 16,
    enabled: true,
    permissionIds: [],
    roleIds: [],
    ratelimits: [],
    createdAt: 1_000,
    ...overrides,
  });
  const credits: CreditRecord = { remaining: 10, refill: { interval: "monthly", amount: 10, refillDay: 31 }, lastRefillAt: 1_000 };
  const ids = (page: { items: { id: string }[] }) => page.items.map((item) => item.id);

  await t.test("keys: a pending imported key moves to its new hash once, atomically", async (t) => {
    const stores = await open(t);
    const pending = key("key_1", { hash: "old-hash", start: "", pendingMigrationId: "legacy" });
    t.equal(await stores.keys.create(pending, null), true);
    t.equal(await stores.keys.create(key("key_dup", { hash: "old-hash" }), null), false, "an imported hash is taken like any other");
    await stores.keys.create(key("key_2"), null);
    t.equal(await stores.keys.completeMigration("ws_a", "key_1", "other", "new-hash", "re_ab", 5), null, "another migration");
    t.equal(await stores.keys.completeMigration("ws_b", "key_1", "legacy", "new-hash", "re_ab", 5), null, "another workspace");
    t.equal(await stores.keys.completeMigration("ws_a", "key_1", "legacy", "hash-key_2", "re_ab", 5), null, "a hash held by another key");
    t.same(await stores.keys.findByHash("ws_a", "old-hash"), pending, "a refused move writes nothing");
    t.equal((await stores.keys.findByHash("ws_a", "hash-key_2"))?.id, "key_2", "the other key keeps its hash");

    const results = await Promise.all(
      Array.from({ length: 10 }, () => stores.keys.completeMigration("ws_a", "key_1", "legacy", "new-hash", "re_ab", 5)),
    );
    t.equal(results.filter((result) => result !== null).length, 1, "concurrent first verifications move it once");
    const { pendingMigrationId: _pending, ...settled } = pending;
    t.same(await stores.keys.get("ws_a", "key_1"), { ...settled, hash: "new-hash", start: "re_ab", updatedAt: 5 });
    t.equal((await stores.keys.findByHash("ws_a", "new-hash"))?.id, "key_1");
    t.equal(await stores.keys.findByHash("ws_a", "old-hash"), null, "the old hash finds nothing any more");
    t.equal(await stores.keys.completeMigration("ws_a", "key_1", "legacy", "newer", "x", 6), null, "no longer pending");
    t.equal(await stores.keys.create(key("key_3", { hash: "old-hash" }), null), true, "the old hash is free again");
  });

  await t.test("keys: create with credits, read by id and by hash within the workspace", async (t) => {
    const stores = await open(t);
    const record = key("key_1", { name: "n", meta: { plan: "pro", nested: { a: [1, 2] } }, identityId: "id_1", expires: 5_000 });
    t.equal(await stores.keys.create(record, credits), true);
    t.same(await stores.keys.get("ws_a", "key_1"), record);
    t.same(await stores.keys.findByHash("ws_a", "hash-key_1"), record);
    t.same(await stores.keys.getCredits("ws_a", "key_1"), credits);
    t.equal(await stores.keys.get("ws_b", "key_1"), null, "other workspace");
    t.equal(await stores.keys.findByHash("ws_b", "hash-key_1"), null, "other workspace");
    t.equal(await stores.keys.create(key("key_1", { hash: "other" }), null), false, "duplicate id");
    t.equal(await stores.keys.create(key("key_2", { hash: "hash-key_1" }), null), false, "duplicate hash");
    t.equal(await stores.keys.get("ws_a", "key_2"), null, "a refused create writes nothing");
    t.equal(await stores.keys.getCredits("ws_a", "key_none"), null);
  });

  await t.test("keys: credits of many keys at once", async (t) => {
    const stores = await open(t);
    await stores.keys.create(key("key_1"), credits);
    await stores.keys.create(key("key_2"), null);
    await stores.keys.create(key("key_3"), { remaining: 3, lastRefillAt: 7 });
    const many = await stores.keys.getCreditsMany("ws_a", ["key_1", "key_2", "key_3", "key_missing"]);
    t.same([...many.keys()].sort(), ["key_1", "key_3"]);
    t.same(many.get("key_3"), { remaining: 3, lastRefillAt: 7 });
  });

  await t.test("keys: update changes the key and its credits together, or nothing", async (t) => {
    const stores = await open(t);
    await stores.keys.create(key("key_1"), null);
    const result = await stores.keys.update("ws_a", "key_1", (current, currentCredits) => {
      t.equal(currentCredits, null);
      return { key: { ...current, name: "renamed", updatedAt: 2_000 }, credits, result: "done" };
    });
    t.equal(result, "done");
    t.equal((await stores.keys.get("ws_a", "key_1"))?.name, "renamed");
    t.same(await stores.keys.getCredits("ws_a", "key_1"), credits);
    t.equal(await stores.keys.update("ws_a", "key_1", () => ({ credits: null, result: 1 })), 1);
    t.equal(await stores.keys.getCredits("ws_a", "key_1"), null, "null removes the balance");
    t.equal(await stores.keys.update("ws_a", "key_1", () => ({ result: "no write" })), "no write");
    t.equal(await stores.keys.update("ws_a", "key_missing", () => ({ result: 1 })), null);
    t.equal(await stores.keys.update("ws_b", "key_1", () => ({ result: 1 })), null, "other workspace");
  });

  await t.test("keys: concurrent updates each see the others' writes", async (t) => {
    const stores = await open(t);
    await stores.keys.create(key("key_1"), { remaining: 0, lastRefillAt: 0 });
    await Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        stores.keys.update("ws_a", "key_1", (current, balance) => ({
          key: { ...current, permissionIds: [...current.permissionIds, `perm_${i}`] },
          credits: { remaining: (balance?.remaining ?? 0) + 1, lastRefillAt: 0 },
          result: undefined,
        })),
      ),
    );
    t.equal((await stores.keys.get("ws_a", "key_1"))?.permissionIds.length, 25, "no lost update of the key");
    t.equal((await stores.keys.getCredits("ws_a", "key_1"))?.remaining, 25, "no lost update of the balance");
  });

  await t.test("keys: list pages live keys of an API, optionally of one identity", async (t) => {
    const stores = await open(t);
    for (let i = 0; i < 7; i++) await stores.keys.create(key(`key_${i}`, i % 2 === 0 ? { identityId: "id_even" } : {}), null);
    await stores.keys.create(key("key_x", { apiId: "api_2" }), null);
    const first = await stores.keys.list("ws_a", "api_1", { limit: 3 });
    t.same(ids(first), ["key_0", "key_1", "key_2"]);
    t.equal(first.nextCursor, "key_3", "the cursor is the first id of the next page");
    const last = await stores.keys.list("ws_a", "api_1", { limit: 3, cursor: "key_6" });
    t.same(ids(last), ["key_6"]);
    t.equal(last.nextCursor, undefined);
    t.same(ids(await stores.keys.list("ws_a", "api_1", { limit: 10, identityId: "id_even" })), ["key_0", "key_2", "key_4", "key_6"]);
    t.same(ids(await stores.keys.list("ws_b", "api_1", { limit: 10 })), [], "other workspace");

    await stores.keys.update("ws_a", "key_2", (current) => ({ key: { ...current, deletedAt: 9 }, result: undefined }));
    await stores.keys.update("ws_a", "key_4", (current) => ({ key: { ...current, identityId: "id_other" }, result: undefined }));
    await stores.keys.update("ws_a", "key_5", (current) => ({ key: { ...current, identityId: "id_even" }, result: undefined }));
    t.same(
      ids(await stores.keys.list("ws_a", "api_1", { limit: 10 })),
      ["key_0", "key_1", "key_3", "key_4", "key_5", "key_6"],
      "soft-deleted keys leave the list",
    );
    t.same(
      ids(await stores.keys.list("ws_a", "api_1", { limit: 10, identityId: "id_even" })),
      ["key_0", "key_5", "key_6"],
      "identity changes move the key",
    );
    t.equal((await stores.keys.findByHash("ws_a", "hash-key_2"))?.deletedAt, 9, "a soft-deleted key is still found by hash");
  });

  await t.test("keys: remove deletes the key, its balance and its indexes", async (t) => {
    const stores = await open(t);
    await stores.keys.create(key("key_1", { identityId: "id_1" }), credits);
    t.equal(await stores.keys.remove("ws_a", "key_1"), true);
    t.equal(await stores.keys.get("ws_a", "key_1"), null);
    t.equal(await stores.keys.findByHash("ws_a", "hash-key_1"), null);
    t.equal(await stores.keys.getCredits("ws_a", "key_1"), null);
    t.same(ids(await stores.keys.list("ws_a", "api_1", { limit: 10 })), []);
    t.same(ids(await stores.keys.list("ws_a", "api_1", { limit: 10, identityId: "id_1" })), []);
    t.equal(await stores.keys.remove("ws_a", "key_1"), false);
    t.equal(await stores.keys.create(key("key_1"), null), true, "the id and hash are free again");
  });

  const permission = (id: string, slug: string, workspaceId = "ws_a"): PermissionRecord => ({
    id,
    workspaceId,
    name: `name of ${slug}`,
    slug,
    createdAt: 1,
  });

  await t.test("permissions: slugs are unique per workspace and case-sensitive", async (t) => {
    const stores = await open(t);
    t.equal(await stores.permissions.create(permission("perm_1", "docs.read")), true);
    t.equal(await stores.permissions.create(permission("perm_2", "docs.read")), false);
    t.equal(await stores.permissions.create(permission("perm_3", "Docs.read")), true, "another case is another slug");
    t.equal(await stores.permissions.create(permission("perm_4", "docs.read", "ws_b")), true, "another workspace");
    t.equal((await stores.permissions.findBySlug("ws_a", "docs.read"))?.id, "perm_1");
    t.equal((await stores.permissions.get("ws_a", "perm_3"))?.slug, "Docs.read");
    t.equal(await stores.permissions.get("ws_b", "perm_1"), null);
    const bySlug = await stores.permissions.findManyBySlugs("ws_a", ["docs.read", "missing", "Docs.read"]);
    t.same([...bySlug.keys()].sort(), ["Docs.read", "docs.read"]);
    t.same(
      (await stores.permissions.getMany("ws_a", ["perm_3", "perm_missing", "perm_1"])).map((p) => p.id),
      ["perm_3", "perm_1"],
    );
  });

  await t.test("permissions: list with search, delete frees the slug", async (t) => {
    const stores = await open(t);
    for (const [id, slug] of [
      ["perm_1", "a.read"],
      ["perm_2", "b.write"],
      ["perm_3", "A.WRITE"],
      ["perm_4", "c.read"],
    ] as const)
      await stores.permissions.create(permission(id, slug));
    t.same(ids(await stores.permissions.list("ws_a", { limit: 2 })), ["perm_1", "perm_2"]);
    const found = await stores.permissions.list("ws_a", { limit: 1, search: "write" });
    t.same(ids(found), ["perm_2"]);
    t.equal(found.nextCursor, "perm_3", "the next page starts at the next match");
    t.same(ids(await stores.permissions.list("ws_a", { limit: 10, search: "write", cursor: "perm_3" })), ["perm_3"]);
    t.equal(await stores.permissions.delete("ws_a", "perm_1"), true);
    t.equal(await stores.permissions.delete("ws_a", "perm_1"), false);
    t.equal(await stores.permissions.findBySlug("ws_a", "a.read"), null);
    t.equal(await stores.permissions.create(permission("perm_5", "a.read")), true);
    t.same(ids(await stores.permissions.list("ws_a", { limit: 10 })), ["perm_2", "perm_3", "perm_4", "perm_5"]);
  });

  const role = (id: string, name: string): RoleRecord => ({ id, workspaceId: "ws_a", name, permissionIds: ["perm_1"], createdAt: 1 });

  await t.test("roles: names unique ignoring case, found ignoring case", async (t) => {
    const stores = await open(t);
    t.equal(await stores.roles.create(role("role_1", "Admin")), true);
    t.equal(await stores.roles.create(role("role_2", "admin")), false);
    t.equal((await stores.roles.findByName("ws_a", "ADMIN"))?.id, "role_1");
    t.equal((await stores.roles.findByName("ws_a", "Admin"))?.name, "Admin", "the name keeps its case");
    t.same((await stores.roles.setPermissions("ws_a", "role_1", ["perm_2", "perm_3"]))?.permissionIds, ["perm_2", "perm_3"]);
    t.same((await stores.roles.get("ws_a", "role_1"))?.permissionIds, ["perm_2", "perm_3"]);
    t.equal(await stores.roles.setPermissions("ws_a", "role_missing", []), null);
    await stores.roles.create(role("role_3", "reader"));
    t.same(ids(await stores.roles.list("ws_a", { limit: 10, search: "ADM" })), ["role_1"]);
    t.same(
      (await stores.roles.getMany("ws_a", ["role_3", "role_1"])).map((r) => r.id),
      ["role_3", "role_1"],
    );
    t.equal(await stores.roles.delete("ws_a", "role_1"), true);
    t.equal(await stores.roles.findByName("ws_a", "admin"), null);
    t.equal(await stores.roles.create(role("role_4", "ADMIN")), true, "the name is free again");
  });

  await t.test("roles: concurrent creates of one name succeed exactly once", async (t) => {
    const stores = await open(t);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => stores.roles.create(role(`role_${i}`, i % 2 ? "Editor" : "editor"))),
    );
    t.equal(results.filter(Boolean).length, 1);
  });

  const identity = (id: string, externalId: string): IdentityRecord => ({
    id,
    workspaceId: "ws_a",
    externalId,
    ratelimits: [],
    createdAt: 1,
  });

  await t.test("identities: externalId unique among live identities, freed by deletion", async (t) => {
    const stores = await open(t);
    t.equal(await stores.identities.create(identity("id_1", "user_1")), true);
    t.equal(await stores.identities.create(identity("id_2", "user_1")), false);
    t.equal((await stores.identities.findByExternalId("ws_a", "user_1"))?.id, "id_1");
    const updated = await stores.identities.update("ws_a", "id_1", (current) => ({ ...current, meta: { tier: "gold" } }));
    t.same(updated?.meta, { tier: "gold" });
    t.equal(await stores.identities.markDeleted("ws_a", "id_1", 50), true);
    t.equal(await stores.identities.markDeleted("ws_a", "id_1", 60), false);
    t.equal(await stores.identities.findByExternalId("ws_a", "user_1"), null);
    t.equal((await stores.identities.get("ws_a", "id_1"))?.deletedAt, 50, "the record stays, marked deleted");
    t.equal(await stores.identities.update("ws_a", "id_1", (current) => current), null, "a deleted identity cannot be updated");
    t.equal(await stores.identities.create(identity("id_2", "user_1")), true, "the externalId can be used again");
    await stores.identities.create(identity("id_3", "other_user"));
    t.same(ids(await stores.identities.list("ws_a", { limit: 10 })), ["id_2", "id_3"], "deleted identities are not listed");
    t.same(ids(await stores.identities.list("ws_a", { limit: 10, search: "OTHER" })), ["id_3"]);
    t.same(
      (await stores.identities.getMany("ws_a", ["id_1", "id_3"])).map((i) => i.id),
      ["id_1", "id_3"],
    );
  });
  await t.test("identities: a credit balance created with the identity, read alone and many at once", async (t) => {
    const stores = await open(t);
    const credits: CreditRecord = {
      remaining: 40,
      refill: { interval: "monthly", amount: 40, refillDay: 3 },
      lastRefillAt: 7,
      lowThreshold: 5,
    };
    t.equal(await stores.identities.create(identity("id_1", "user_1"), credits), true);
    t.equal(await stores.identities.create(identity("id_2", "user_2"), null), true);
    t.equal(await stores.identities.create(identity("id_3", "user_3")), true);
    t.equal(await stores.identities.create(identity("id_4", "user_1"), { remaining: 1, lastRefillAt: 0 }), false);
    t.same(await stores.identities.getCredits("ws_a", "id_1"), credits, "read back as written");
    t.equal(await stores.identities.getCredits("ws_a", "id_2"), null);
    t.equal(await stores.identities.getCredits("ws_a", "id_4"), null, "a refused create wrote no balance");
    t.equal(await stores.identities.getCredits("ws_b", "id_1"), null, "within the workspace only");
    const many = await stores.identities.getCreditsMany("ws_a", ["id_1", "id_2", "id_missing"]);
    t.same([...many.keys()], ["id_1"]);
    t.same((await stores.identities.getCreditsMany("ws_a", [])).size, 0);
  });

  await t.test("identities: updateCredits changes a live identity's balance, and nothing of a deleted one", async (t) => {
    const stores = await open(t);
    await stores.identities.create(identity("id_1", "user_1"));
    const given = await stores.identities.updateCredits("ws_a", "id_1", (current, credits) => {
      t.equal(current.externalId, "user_1");
      t.equal(credits, null);
      return { credits: { remaining: 9, lastRefillAt: 1 }, result: "given" };
    });
    t.equal(given, "given");
    t.same(await stores.identities.getCredits("ws_a", "id_1"), { remaining: 9, lastRefillAt: 1 });
    t.equal(await stores.identities.updateCredits("ws_a", "id_1", () => ({ result: "left" })), "left");
    t.same(await stores.identities.getCredits("ws_a", "id_1"), { remaining: 9, lastRefillAt: 1 }, "undefined leaves the balance");
    await stores.identities.updateCredits("ws_a", "id_1", () => ({ credits: null, result: undefined }));
    t.equal(await stores.identities.getCredits("ws_a", "id_1"), null, "null removes it");
    await Promise.all(
      Array.from({ length: 20 }, () =>
        stores.identities.updateCredits("ws_a", "id_1", (_, credits) => ({
          credits: { remaining: (credits?.remaining ?? 0) + 2, lastRefillAt: 1 },
          result: undefined,
        })),
      ),
    );
    t.equal((await stores.identities.getCredits("ws_a", "id_1"))?.remaining, 40, "concurrent changes each see the others'");
    await stores.identities.markDeleted("ws_a", "id_1", 5);
    t.equal(await stores.identities.getCredits("ws_a", "id_1"), null, "the balance goes with the identity");
    t.equal(await stores.identities.updateCredits("ws_a", "id_1", () => ({ credits: null, result: 1 })), null, "deleted");
    t.equal(await stores.identities.updateCredits("ws_a", "id_missing", () => ({ credits: null, result: 1 })), null, "absent");
  });

  await t.test("apis: findByKeySpace finds the API of a key space within its workspace only", async (t) => {
    const stores = await open(t);
    await stores.apis.create(api("api_1"));
    await stores.apis.create(api("api_2", "ws_b"));
    t.same(await stores.apis.findByKeySpace("ws_a", "ks_api_1"), api("api_1"));
    t.equal(await stores.apis.findByKeySpace("ws_b", "ks_api_1"), null, "another workspace does not see it");
    t.equal(await stores.apis.findByKeySpace("ws_a", "ks_api_2"), null, "nor the other way round");
    t.equal(await stores.apis.findByKeySpace("ws_a", "ks_missing"), null);
    await stores.apis.markDeleted("ws_a", "api_1", 9_000);
    t.equal((await stores.apis.findByKeySpace("ws_a", "ks_api_1"))?.deletedAt, 9_000, "a deleted API is still found, marked deleted");
  });

  await t.test("apis: a refused create does not index its key space", async (t) => {
    const stores = await open(t);
    await stores.apis.create(api("api_1"));
    t.equal(await stores.apis.create({ ...api("api_1"), keySpaceId: "ks_other" }), false);
    t.equal(await stores.apis.findByKeySpace("ws_a", "ks_other"), null);
  });

  await t.test("dashboard sessions: create once, read copies, touch, delete for good", async (t) => {
    const stores = await open(t);
    const session = {
      id: "hash_of_session_1",
      rootKeyHash: "rk_hash",
      workspaceId: "ws_a",
      csrfToken: "csrf_1",
      createdAt: 1_000,
      lastSeenAt: 1_000,
    };
    t.equal(await stores.dashboardSessions.get(session.id), null);
    t.equal(await stores.dashboardSessions.create(session, 60_000), true);
    t.equal(await stores.dashboardSessions.create({ ...session, csrfToken: "csrf_other" }, 60_000), false, "an id is taken once");
    const read = await stores.dashboardSessions.get(session.id);
    t.same(read, session);
    if (read) read.workspaceId = "ws_changed";
    t.equal((await stores.dashboardSessions.get(session.id))?.workspaceId, "ws_a", "a returned record is a copy");
    await stores.dashboardSessions.touch(session.id, 5_000, 60_000);
    t.same(await stores.dashboardSessions.get(session.id), { ...session, lastSeenAt: 5_000 });
    await stores.dashboardSessions.delete(session.id);
    t.equal(await stores.dashboardSessions.get(session.id), null);
    await stores.dashboardSessions.touch(session.id, 6_000, 60_000);
    t.equal(await stores.dashboardSessions.get(session.id), null, "a touch does not bring a deleted session back");
  });

  await t.test("analytics quota: counts queries per workspace and window up to the limit", async (t) => {
    const stores = await open(t);
    const limits = { queries: 3, executionMs: 10_000 };
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await stores.analyticsQuota.acquire("ws_a", 60_000, 60_000, limits));
    t.same(
      results.map((r) => r.allowed),
      [true, true, true, false],
    );
    t.same(
      results.map((r) => r.usage.queries),
      [1, 2, 3, 3],
      "a refused query is not counted",
    );
    t.equal((await stores.analyticsQuota.acquire("ws_b", 60_000, 60_000, limits)).allowed, true, "another workspace has its own quota");
    t.same(
      (await stores.analyticsQuota.acquire("ws_a", 120_000, 60_000, limits)).usage,
      { queries: 1, executionMs: 0 },
      "the next window starts afresh",
    );
  });

  await t.test("analytics quota: execution time used up refuses further queries in the window", async (t) => {
    const stores = await open(t);
    const limits = { queries: 100, executionMs: 1_000 };
    t.equal((await stores.analyticsQuota.acquire("ws_a", 0, 60_000, limits)).allowed, true);
    await stores.analyticsQuota.addExecutionMs("ws_a", 0, 60_000, 600);
    t.equal((await stores.analyticsQuota.acquire("ws_a", 0, 60_000, limits)).allowed, true);
    await stores.analyticsQuota.addExecutionMs("ws_a", 0, 60_000, 400);
    const refused = await stores.analyticsQuota.acquire("ws_a", 0, 60_000, limits);
    t.same(refused, { allowed: false, usage: { queries: 2, executionMs: 1_000 } });
  });

  await t.test("analytics quota: concurrent acquires never exceed the limit", async (t) => {
    const stores = await open(t);
    const results = await Promise.all(
      Array.from({ length: 30 }, () => stores.analyticsQuota.acquire("ws_a", 0, 60_000, { queries: 10, executionMs: 1_000 })),
    );
    t.equal(results.filter((r) => r.allowed).length, 10);
  });

  await ratelimitNamespaceContract(t, open);
  await ratelimitCounterContract(t, open);
  await creditContract(t, open);
  await routeStoreContract(t, open);
  await webhookStoreContract(t, open);
  await portalStoreContract(t, open);
  await usageReportStoreContract(t, open);
  // Memory stores have no audit outbox (the embedded engine's journal is tested in audit-journal.test.ts).
  if ((await open(t)).auditOutbox !== undefined) await auditOutboxContract(t, async (t) => (await open(t)).auditOutbox as AuditOutbox);
}

async function ratelimitNamespaceContract(t: Test, open: (t: Test) => Promise<Stores>): Promise<void> {
  const namespace = (id: string, name: string, workspaceId = "ws_a"): RatelimitNamespaceRecord => ({
    id,
    workspaceId,
    name,
    createdAt: 3_000,
  });
  const override = (id: string, identifier: string, limit = 10, namespaceId = "rlns_1"): RatelimitOverrideRecord => ({
    id,
    workspaceId: "ws_a",
    namespaceId,
    identifier,
    limit,
    durationMs: 60_000,
    createdAt: 4_000,
  });

  await t.test("rate limit namespaces: create, find by id and by name within the workspace only", async (t) => {
    const { ratelimitNamespaces: store } = await open(t);
    t.equal(await store.createNamespace(namespace("rlns_1", "emails")), true);
    t.same(await store.getNamespace("ws_a", "rlns_1"), namespace("rlns_1", "emails"));
    t.same(await store.findNamespaceByName("ws_a", "emails"), namespace("rlns_1", "emails"));
    t.equal(await store.getNamespace("ws_b", "rlns_1"), null, "another workspace does not see it by id");
    t.equal(await store.findNamespaceByName("ws_b", "emails"), null, "nor by name");
    t.equal(await store.createNamespace(namespace("rlns_2", "emails")), false, "a taken name is refused");
    t.equal(await store.createNamespace(namespace("rlns_1", "other")), false, "a taken id is refused");
    t.equal(await store.findNamespaceByName("ws_a", "other"), null, "a refused create writes nothing");
    t.equal(await store.createNamespace(namespace("rlns_3", "emails", "ws_b")), true, "the same name in another workspace is fine");
    t.same(
      (await store.listNamespaces("ws_a")).map((record) => record.id),
      ["rlns_1"],
    );
  });

  await t.test("rate limit namespaces: names may hold any character", async (t) => {
    const { ratelimitNamespaces: store } = await open(t);
    const name = "a:b {c} * ü/\\n 🙂";
    t.equal(await store.createNamespace(namespace("rlns_odd", name)), true);
    t.equal((await store.findNamespaceByName("ws_a", name))?.id, "rlns_odd");
    t.equal(await store.findNamespaceByName("ws_a", "a:b {c} *"), null);
  });

  await t.test("rate limit namespaces: markNamespaceDeleted soft-deletes once and keeps the name taken", async (t) => {
    const { ratelimitNamespaces: store } = await open(t);
    await store.createNamespace(namespace("rlns_1", "emails"));
    t.equal((await store.markNamespaceDeleted("ws_a", "rlns_1", 9_000))?.deletedAt, 9_000);
    t.equal((await store.findNamespaceByName("ws_a", "emails"))?.deletedAt, 9_000);
    t.equal(await store.markNamespaceDeleted("ws_a", "rlns_1", 9_500), null, "a second delete finds nothing live");
    t.equal(await store.markNamespaceDeleted("ws_b", "rlns_1", 9_500), null, "nor does another workspace");
    t.equal(await store.createNamespace(namespace("rlns_2", "emails")), false);
  });

  await t.test("rate limit overrides: set is an upsert that keeps id and createdAt", async (t) => {
    const { ratelimitNamespaces: store } = await open(t);
    await store.createNamespace(namespace("rlns_1", "emails"));
    t.same(await store.setOverride(override("rlor_a", "alice", 5)), override("rlor_a", "alice", 5));
    const updated = await store.setOverride({ ...override("rlor_other", "alice", 7), durationMs: 1_000, createdAt: 99_999 });
    t.same(updated, { ...override("rlor_a", "alice", 7), durationMs: 1_000 }, "same id and createdAt, new limit and duration");
    t.same(await store.getOverride("ws_a", "rlns_1", "alice"), updated);
    t.equal(await store.getOverride("ws_a", "rlns_1", "bob"), null);
    t.equal(await store.getOverride("ws_b", "rlns_1", "alice"), null, "another workspace sees nothing");
    t.same(
      (await store.allOverrides("ws_a", "rlns_1")).map((record) => record.id),
      ["rlor_a"],
    );
  });

  await t.test("rate limit overrides: get and delete address the stored identifier exactly", async (t) => {
    const { ratelimitNamespaces: store } = await open(t);
    await store.createNamespace(namespace("rlns_1", "emails"));
    await store.setOverride(override("rlor_a", "*@example.com"));
    t.equal(await store.getOverride("ws_a", "rlns_1", "bob@example.com"), null, "no wildcard matching here");
    t.equal(await store.deleteOverride("ws_a", "rlns_1", "bob@example.com"), null);
    t.equal((await store.deleteOverride("ws_a", "rlns_1", "*@example.com"))?.id, "rlor_a");
    t.equal(await store.deleteOverride("ws_a", "rlns_1", "*@example.com"), null, "deleting twice finds nothing");
    t.same(await store.allOverrides("ws_a", "rlns_1"), []);
    t.same(await store.listOverrides("ws_a", "rlns_1", { limit: 10 }), []);
    const again = await store.setOverride(override("rlor_b", "*@example.com"));
    t.equal(again.id, "rlor_b", "after a delete, a new set is a new override");
  });

  await t.test("rate limit overrides: listOverrides pages by id with an inclusive cursor", async (t) => {
    const { ratelimitNamespaces: store } = await open(t);
    await store.createNamespace(namespace("rlns_1", "emails"));
    for (const [id, identifier] of [
      ["rlor_c", "carol"],
      ["rlor_a", "alice"],
      ["rlor_e", "eve"],
      ["rlor_b", "bob"],
      ["rlor_d", "dave"],
    ]) {
      await store.setOverride(override(id as string, identifier as string));
    }
    const ids = async (page: { cursor?: string; limit: number }) =>
      (await store.listOverrides("ws_a", "rlns_1", page)).map((record) => record.id);
    t.same(await ids({ limit: 2 }), ["rlor_a", "rlor_b"]);
    t.same(await ids({ cursor: "rlor_c", limit: 2 }), ["rlor_c", "rlor_d"], "the cursor is the first id of the page");
    t.same(await ids({ cursor: "rlor_bb", limit: 10 }), ["rlor_c", "rlor_d", "rlor_e"], "a cursor need not be a stored id");
    t.same(await ids({ cursor: "rlor_z", limit: 10 }), []);
    t.same(await store.listOverrides("ws_a", "rlns_other", { limit: 10 }), [], "an unknown namespace has none");
  });

  await t.test("rate limit overrides: namespaceState's version token changes with every override write, and only then", async (t) => {
    const { ratelimitNamespaces: store } = await open(t);
    t.equal(await store.namespaceState("ws_a", "rlns_1"), null);
    await store.createNamespace(namespace("rlns_1", "emails"));
    const versions = [(await store.namespaceState("ws_a", "rlns_1"))?.overridesVersion];
    t.same((await store.namespaceState("ws_a", "rlns_1"))?.namespace, namespace("rlns_1", "emails"));
    t.equal((await store.namespaceState("ws_a", "rlns_1"))?.overridesVersion, versions[0], "reading does not change it");
    await store.setOverride(override("rlor_a", "alice"));
    versions.push((await store.namespaceState("ws_a", "rlns_1"))?.overridesVersion);
    await store.setOverride(override("rlor_x", "alice", 3));
    versions.push((await store.namespaceState("ws_a", "rlns_1"))?.overridesVersion);
    await store.deleteOverride("ws_a", "rlns_1", "alice");
    versions.push((await store.namespaceState("ws_a", "rlns_1"))?.overridesVersion);
    await store.deleteOverride("ws_a", "rlns_1", "alice");
    t.equal((await store.namespaceState("ws_a", "rlns_1"))?.overridesVersion, versions[3], "a delete that finds nothing changes nothing");
    t.equal(new Set(versions).size, 4, "each write made a new token");
    t.equal(await store.namespaceState("ws_b", "rlns_1"), null);
  });

  await t.test("rate limit overrides: concurrent sets of one identifier leave one override", async (t) => {
    const { ratelimitNamespaces: store } = await open(t);
    await store.createNamespace(namespace("rlns_1", "emails"));
    const stored = await Promise.all(Array.from({ length: 20 }, (_, i) => store.setOverride(override(`rlor_${i}`, "alice", i))));
    t.equal(new Set(stored.map((record) => record.id)).size, 1, "every caller got the same override id");
    t.equal((await store.allOverrides("ws_a", "rlns_1")).length, 1);
  });
}

async function ratelimitCounterContract(t: Test, open: (t: Test) => Promise<Stores>): Promise<void> {
  const DURATION = 10_000;
  /** A time inside window 1000 of DURATION; `ms` is the offset into that window. */
  const at = (ms: number, window = 1_000) => window * DURATION + ms;
  const check = (bucket: string, limit: number, cost = 1, durationMs = DURATION): WindowCheck => ({ bucket, limit, durationMs, cost });

  await t.test("rate limit counters: admit up to the limit within a window, then deny without consuming", async (t) => {
    const { ratelimitCounters: counters } = await open(t);
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++) {
      const outcome = await counters.applyChecks("ws_a", [check("b", 3)], at(100 + i));
      t.equal(outcome.passed, true);
      remaining.push(outcome.results[0]?.remaining as number);
    }
    t.same(remaining, [2, 1, 0]);
    // Whether the store answered alone (a window it knows is exhausted) is not part of the answer.
    const { decidedLocally: _alone, ...denied } = await counters.applyChecks("ws_a", [check("b", 3)], at(200));
    t.same(denied, { passed: false, results: [{ passed: false, remaining: 0, resetAt: at(0, 1_001) }], now: at(200) });
    t.equal((await counters.applyChecks("ws_b", [check("b", 3)], at(200))).passed, true, "another workspace counts apart");
    t.equal((await counters.applyChecks("ws_a", [check("b", 4)], at(200))).results[0]?.remaining, 3, "another limit counts apart");
    t.equal((await counters.applyChecks("ws_a", [check("b", 3, 1, 20_000)], at(200))).passed, true, "another duration counts apart");
  });

  await t.test("rate limit counters: reset is the end of the fixed window, and the previous window fades out over the next", async (t) => {
    const { ratelimitCounters: counters } = await open(t);
    for (let i = 0; i < 10; i++) await counters.applyChecks("ws_a", [check("b", 10)], at(i));
    const atStart = await counters.applyChecks("ws_a", [check("b", 10)], at(0, 1_001));
    t.same(
      atStart.results[0],
      { passed: true, remaining: 0, resetAt: at(0, 1_002) },
      "9.999 of the previous window's 10 still count (floor 9): one more fits",
    );
    t.equal((await counters.applyChecks("ws_a", [check("b", 10)], at(1, 1_001))).passed, false, "then the window is full");
    // Halfway, half of the previous 10 count (floor of 10 × 4999/10000 = 4): 1 + 4 used, 5 more fit.
    const halfway = await counters.applyChecks("ws_a", [check("b", 10, 5)], at(5_000, 1_001));
    t.same(halfway.results[0], { passed: true, remaining: 0, resetAt: at(0, 1_002) });
    t.equal(
      (await counters.applyChecks("ws_a", [check("b", 10)], at(9_999, 1_001))).results[0]?.remaining,
      3,
      "at the window's last ms only the current window's 6 count",
    );
    const later = await counters.applyChecks("ws_a", [check("b", 10)], at(0, 1_003));
    t.equal(later.results[0]?.remaining, 9, "two windows on, nothing counts");
  });

  await t.test("rate limit counters: a cost larger than what remains is denied and consumes nothing", async (t) => {
    const { ratelimitCounters: counters } = await open(t);
    await counters.applyChecks("ws_a", [check("b", 10, 7)], at(0));
    const denied = await counters.applyChecks("ws_a", [check("b", 10, 4)], at(1));
    t.same(denied.results[0], { passed: false, remaining: 3, resetAt: at(0, 1_001) }, "remaining is what is really left");
    t.equal((await counters.applyChecks("ws_a", [check("b", 10, 3)], at(2))).results[0]?.remaining, 0, "the 3 left are still there");
  });

  await t.test("rate limit counters: cost 0 checks without consuming and is denied only when the window is over", async (t) => {
    const { ratelimitCounters: counters } = await open(t);
    for (let i = 0; i < 5; i++)
      t.same((await counters.applyChecks("ws_a", [check("b", 2, 0)], at(i))).results[0], {
        passed: true,
        remaining: 2,
        resetAt: at(0, 1_001),
      });
    await counters.applyChecks("ws_a", [check("b", 2, 2)], at(10));
    t.same(
      (await counters.applyChecks("ws_a", [check("b", 2, 0)], at(11))).results[0],
      { passed: true, remaining: 0, resetAt: at(0, 1_001) },
      "at the limit, not over it",
    );
    t.equal((await counters.applyChecks("ws_a", [check("b", 2, 1)], at(12))).passed, false);
  });

  await t.test("rate limit counters: limit 0 denies everything, cost 0 included", async (t) => {
    const { ratelimitCounters: counters } = await open(t);
    for (const cost of [0, 1, 5])
      t.same((await counters.applyChecks("ws_a", [check("b", 0, cost)], at(0))).results[0], {
        passed: false,
        remaining: 0,
        resetAt: at(0, 1_001),
      });
  });

  await t.test("rate limit counters: several checks are all-or-nothing; when the last fails no counter moves", async (t) => {
    const { ratelimitCounters: counters } = await open(t);
    await counters.applyChecks("ws_a", [check("third", 1)], at(0));
    const denied = await counters.applyChecks("ws_a", [check("first", 5, 2), check("second", 3), check("third", 1)], at(1));
    t.equal(denied.passed, false);
    t.same(
      denied.results.map((result) => [result.passed, result.remaining]),
      [
        [true, 5],
        [true, 3],
        [false, 0],
      ],
      "checks that passed on their own report their room as if nothing was consumed",
    );
    const after = await counters.applyChecks("ws_a", [check("first", 5, 0), check("second", 3, 0)], at(2));
    t.same(
      after.results.map((result) => result.remaining),
      [5, 3],
      "nothing was consumed",
    );
    const passed = await counters.applyChecks("ws_a", [check("first", 5, 2), check("second", 3)], at(3));
    t.same([passed.passed, ...passed.results.map((result) => result.remaining)], [true, 3, 2]);
  });

  await t.test("rate limit counters: checks of one bucket in one call see each other's cost", async (t) => {
    const { ratelimitCounters: counters } = await open(t);
    const outcome = await counters.applyChecks("ws_a", [check("b", 3, 2), check("b", 3, 2)], at(0));
    t.same(
      outcome.results.map((result) => result.passed),
      [true, false],
      "2 + 2 does not fit in 3",
    );
    t.equal(outcome.passed, false);
    const fits = await counters.applyChecks("ws_a", [check("b", 3, 2), check("b", 3, 1)], at(1));
    t.same([fits.passed, ...fits.results.map((result) => result.remaining)], [true, 1, 0]);
  });

  await t.test("rate limit counters: buckets may hold any character without colliding", async (t) => {
    const { ratelimitCounters: counters } = await open(t);
    await counters.applyChecks("ws_a", [check("ns:x:a:b", 1)], at(0));
    t.equal((await counters.applyChecks("ws_a", [check("ns:x:a", 1)], at(1))).passed, true);
    t.equal((await counters.applyChecks("ws_a", [check("ns:x:a:b", 1)], at(2))).passed, false);
    t.equal((await counters.applyChecks("ws_a", [check("{ü} *\n", 1)], at(3))).passed, true);
  });

  await t.test("rate limit counters: a clock that steps back never admits more", async (t) => {
    const { ratelimitCounters: counters } = await open(t);
    for (let i = 0; i < 4; i++) await counters.applyChecks("ws_a", [check("b", 4)], at(0, 1_001));
    const earlier = await counters.applyChecks("ws_a", [check("b", 4)], at(9_000, 1_000));
    t.same(earlier.results[0], { passed: false, remaining: 0, resetAt: at(0, 1_002) }, "decided within the newer window");
  });

  await t.test("rate limit counters: concurrent calls never admit more than the limit", async (t) => {
    const { ratelimitCounters: counters } = await open(t);
    const outcomes = await Promise.all(Array.from({ length: 200 }, (_, i) => counters.applyChecks("ws_a", [check("b", 50)], at(i))));
    t.equal(outcomes.filter((outcome) => outcome.passed).length, 50);
  });
}

/** Credit checks joined to the counters' atomic step (verification's limits and credits, all-or-nothing). */
async function creditContract(t: Test, open: (t: Test) => Promise<Stores>): Promise<void> {
  const DURATION = 10_000;
  const at = (ms: number) => 1_000 * DURATION + ms;
  const check = (bucket: string, limit: number, cost = 1): WindowCheck => ({ bucket, limit, durationMs: DURATION, cost });
  const withBalance = async (stores: Stores, id: string, balance: CreditRecord | null) => {
    await stores.keys.create(keyRecord(id), balance);
  };

  await t.test("credits: taken together with the limits, and reported after the call", async (t) => {
    const stores = await open(t);
    await withBalance(stores, "key_1", { remaining: 5, lastRefillAt: 0 });
    const outcome = await stores.ratelimitCounters.applyChecks("ws_a", [check("k", 10)], at(1), { keyId: "key_1", cost: 2 });
    t.equal(outcome.passed, true);
    t.same(outcome.credit, { passed: true, remaining: 3 });
    t.equal(outcome.results[0]?.remaining, 9);
    t.equal((await stores.keys.getCredits("ws_a", "key_1"))?.remaining, 3, "the key store reads the new balance");
  });

  await t.test("credits: a credit denial takes no limit, a limit denial takes no credit", async (t) => {
    const stores = await open(t);
    await withBalance(stores, "key_1", { remaining: 1, lastRefillAt: 0 });
    const short = await stores.ratelimitCounters.applyChecks("ws_a", [check("k", 10)], at(1), { keyId: "key_1", cost: 2 });
    t.equal(short.passed, false);
    t.same(short.credit, { passed: false, remaining: 1 });
    t.equal(short.results[0]?.passed, true, "the limit on its own would pass");
    t.equal(short.results[0]?.remaining, 10, "but nothing of it was taken");
    await stores.ratelimitCounters.applyChecks("ws_a", [check("full", 1)], at(2));
    const limited = await stores.ratelimitCounters.applyChecks("ws_a", [check("full", 1)], at(3), { keyId: "key_1", cost: 1 });
    t.equal(limited.passed, false);
    t.equal((await stores.keys.getCredits("ws_a", "key_1"))?.remaining, 1, "no credit was taken");
    t.equal(
      (await stores.ratelimitCounters.applyChecks("ws_a", [check("k", 10)], at(4))).results[0]?.remaining,
      9,
      "the first call took no limit",
    );
  });

  await t.test("credits: cost 0 always passes; a key without a balance is unlimited", async (t) => {
    const stores = await open(t);
    await withBalance(stores, "key_empty", { remaining: 0, lastRefillAt: 0 });
    await withBalance(stores, "key_unlimited", null);
    t.same((await stores.ratelimitCounters.applyChecks("ws_a", [], at(1), { keyId: "key_empty", cost: 0 })).credit, {
      passed: true,
      remaining: 0,
    });
    t.same((await stores.ratelimitCounters.applyChecks("ws_a", [], at(1), { keyId: "key_empty", cost: 1 })).credit, {
      passed: false,
      remaining: 0,
    });
    const unlimited = await stores.ratelimitCounters.applyChecks("ws_a", [], at(1), { keyId: "key_unlimited", cost: 5 });
    t.equal(unlimited.passed, true);
    t.same(unlimited.credit, { passed: true, remaining: null });
    t.equal(await stores.keys.getCredits("ws_a", "key_unlimited"), null, "no balance is created");
  });

  await t.test("credits: due refills are applied in the same step, daily and monthly (refillDay clamped)", async (t) => {
    const stores = await open(t);
    const day = (y: number, m: number, d: number, h = 0) => Date.UTC(y, m - 1, d, h);
    const cases: { refill: CreditRecord["refill"]; lastRefillAt: number; now: number; refilled: boolean }[] = [
      { refill: { interval: "daily", amount: 10 }, lastRefillAt: day(2026, 3, 5, 9), now: day(2026, 3, 5, 23), refilled: false },
      { refill: { interval: "daily", amount: 10 }, lastRefillAt: day(2026, 3, 5, 9), now: day(2026, 3, 6), refilled: true },
      {
        refill: { interval: "monthly", amount: 10, refillDay: 31 },
        lastRefillAt: day(2026, 1, 31, 1),
        now: day(2026, 2, 27, 23),
        refilled: false,
      },
      {
        refill: { interval: "monthly", amount: 10, refillDay: 31 },
        lastRefillAt: day(2026, 1, 31, 1),
        now: day(2026, 2, 28),
        refilled: true,
      },
      {
        refill: { interval: "monthly", amount: 10, refillDay: 29 },
        lastRefillAt: day(2026, 1, 30),
        now: day(2026, 2, 28, 5),
        refilled: true,
      },
      {
        refill: { interval: "monthly", amount: 10, refillDay: 30 },
        lastRefillAt: day(2028, 2, 1),
        now: day(2028, 2, 29, 5),
        refilled: true,
      },
      {
        refill: { interval: "monthly", amount: 10, refillDay: 31 },
        lastRefillAt: day(2028, 2, 1),
        now: day(2028, 2, 28, 5),
        refilled: false,
      },
      {
        refill: { interval: "monthly", amount: 10, refillDay: 15 },
        lastRefillAt: day(2025, 12, 20),
        now: day(2026, 1, 14, 12),
        refilled: false,
      },
      {
        refill: { interval: "monthly", amount: 10, refillDay: 15 },
        lastRefillAt: day(2025, 12, 20),
        now: day(2026, 1, 15),
        refilled: true,
      },
    ];
    for (const [index, item] of cases.entries()) {
      const id = `key_${index}`;
      await withBalance(stores, id, { remaining: 1, ...(item.refill ? { refill: item.refill } : {}), lastRefillAt: item.lastRefillAt });
      const outcome = await stores.ratelimitCounters.applyChecks("ws_a", [], item.now, { keyId: id, cost: 1 });
      t.same(
        outcome.credit,
        { passed: true, remaining: item.refilled ? 9 : 0 },
        `case ${index}: ${item.refilled ? "refilled" : "not refilled"} at ${new Date(item.now).toISOString()}`,
      );
    }
    const stored = await stores.keys.getCredits("ws_a", "key_3");
    t.same(
      stored,
      { remaining: 9, refill: { interval: "monthly", amount: 10, refillDay: 31 }, lastRefillAt: day(2026, 2, 28) },
      "the refill is stored with its moment",
    );
  });

  await t.test("credits: calls at one instant on one key (one batch on Redis) are decided in order, a refill applied once", async (t) => {
    const stores = await open(t);
    const now = Date.UTC(2026, 2, 6, 12);
    await withBalance(stores, "key_1", { remaining: 1, refill: { interval: "daily", amount: 12 }, lastRefillAt: Date.UTC(2026, 2, 5, 9) });
    await withBalance(stores, "key_2", { remaining: 3, lastRefillAt: 0 });
    const minute = (limit: number, cost = 1): WindowCheck => ({ bucket: "hot", limit, durationMs: 60_000, cost });
    const costs = [5, 5, 5, 1, 1, 1, 0, 1];
    const outcomes = await Promise.all([
      ...costs.map((cost) => stores.ratelimitCounters.applyChecks("ws_a", [minute(10)], now, { keyId: "key_1", cost })),
      stores.ratelimitCounters.applyChecks("ws_a", [minute(10, 3)], now, { keyId: "key_2", cost: 3 }),
      stores.ratelimitCounters.applyChecks("ws_a", [minute(10)], now, { keyId: "key_2", cost: 1 }),
    ]);
    t.same(
      outcomes.map((outcome) => [outcome.passed, outcome.results[0]?.remaining, outcome.credit?.remaining]),
      [
        [true, 9, 7], // refilled to 12 once, then 5 taken
        [true, 8, 2],
        [false, 8, 2], // 5 wanted, 2 left: the limit is not taken either
        [true, 7, 1],
        [true, 6, 0],
        [false, 6, 0],
        [true, 5, 0], // cost 0 passes on an empty balance, and takes its limit
        [false, 5, 0],
        [true, 2, 0], // the other key: its balance and the shared limit
        [false, 2, 0],
      ],
      "each call sees what the ones before it took",
    );
    t.same(
      await stores.keys.getCredits("ws_a", "key_1"),
      { remaining: 0, refill: { interval: "daily", amount: 12 }, lastRefillAt: Date.UTC(2026, 2, 6) },
      "the refill is stored once, with its moment",
    );
    t.same(await stores.keys.getCredits("ws_a", "key_2"), { remaining: 0, lastRefillAt: 0 });
    t.equal(
      (await stores.ratelimitCounters.applyChecks("ws_a", [minute(10, 0)], now + 1)).results[0]?.remaining,
      2,
      "the counter holds what the batch took",
    );
  });

  await t.test("credits: balances beyond 14 digits are kept exactly", async (t) => {
    const stores = await open(t);
    await withBalance(stores, "key_big", { remaining: 9_007_199_254_740_000, lastRefillAt: 1_795_273_731_570 });
    const outcome = await stores.ratelimitCounters.applyChecks("ws_a", [], at(1), { keyId: "key_big", cost: 1 });
    t.same(outcome.credit, { passed: true, remaining: 9_007_199_254_739_999 });
    t.same(await stores.keys.getCredits("ws_a", "key_big"), { remaining: 9_007_199_254_739_999, lastRefillAt: 1_795_273_731_570 });
  });

  await t.test("credits: concurrent calls take exactly the balance", async (t) => {
    const stores = await open(t);
    await withBalance(stores, "key_1", { remaining: 50, lastRefillAt: 0 });
    const outcomes = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        stores.ratelimitCounters.applyChecks("ws_a", [check("k", 1_000)], at(i), { keyId: "key_1", cost: 1 }),
      ),
    );
    t.equal(outcomes.filter((outcome) => outcome.passed).length, 50);
    t.equal((await stores.keys.getCredits("ws_a", "key_1"))?.remaining, 0);
    t.equal(
      (await stores.ratelimitCounters.applyChecks("ws_a", [check("k", 1_000)], at(500))).results[0]?.remaining,
      949,
      "only the 50 admitted calls took the limit",
    );
  });

  await t.test("credit refunds: the amount is added after the refills due at that moment, and reported", async (t) => {
    const stores = await open(t);
    const day = Date.UTC(2026, 2, 6);
    await withBalance(stores, "key_plain", { remaining: 3, lastRefillAt: 0 });
    await withBalance(stores, "key_daily", { remaining: 2, refill: { interval: "daily", amount: 10 }, lastRefillAt: day - 1 });
    t.equal(await stores.keys.refundCredits("ws_a", "key_plain", 4, day), 7);
    t.same(await stores.keys.getCredits("ws_a", "key_plain"), { remaining: 7, lastRefillAt: 0 });
    t.equal(await stores.keys.refundCredits("ws_a", "key_daily", 1, day - 2), 3, "before the refill is due: added to what is there");
    t.equal(await stores.keys.refundCredits("ws_a", "key_daily", 1, day + 5), 11, "once due: refilled to 10 first, then added");
    t.same(
      await stores.keys.getCredits("ws_a", "key_daily"),
      { remaining: 11, refill: { interval: "daily", amount: 10 }, lastRefillAt: day },
      "the refill is stored with its moment",
    );
    const spend = await stores.ratelimitCounters.applyChecks("ws_a", [], day + 6, { keyId: "key_daily", cost: 11 });
    t.same(spend.credit, { passed: true, remaining: 0 }, "a spend at the same moment applies no second refill");
    t.equal(await stores.keys.refundCredits("ws_a", "key_big", 1, day), null, "a key that does not exist: nothing");
  });

  await t.test("identity credits: a check with an identityId spends the identity's balance, not the key's", async (t) => {
    const stores = await open(t);
    await withBalance(stores, "key_1", { remaining: 5, lastRefillAt: 0 });
    await stores.identities.create(
      { id: "id_1", workspaceId: "ws_a", externalId: "team", ratelimits: [], createdAt: 1 },
      { remaining: 3, lastRefillAt: 0, lowThreshold: 1 },
    );
    const spend = await stores.ratelimitCounters.applyChecks("ws_a", [check("k", 10)], at(1), {
      keyId: "key_1",
      identityId: "id_1",
      cost: 2,
    });
    t.same(spend.credit, { passed: true, remaining: 1 });
    t.same(await stores.identities.getCredits("ws_a", "id_1"), { remaining: 1, lastRefillAt: 0, lowThreshold: 1 }, "the threshold is kept");
    t.equal((await stores.keys.getCredits("ws_a", "key_1"))?.remaining, 5, "the key's own balance was not touched");
    const short = await stores.ratelimitCounters.applyChecks("ws_a", [], at(2), { keyId: "key_1", identityId: "id_1", cost: 2 });
    t.same(short.credit, { passed: false, remaining: 1 });
    const outcomes = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        stores.ratelimitCounters.applyChecks("ws_a", [], at(3 + i), { keyId: `key_${i % 3}`, identityId: "id_1", cost: 1 }),
      ),
    );
    t.equal(outcomes.filter((outcome) => outcome.passed).length, 1, "keys of one identity share its balance exactly");
    t.equal(await stores.identities.refundCredits("ws_a", "id_1", 4, at(50)), 4, "refunds go back to the identity's balance");
    t.same(await stores.identities.getCredits("ws_a", "id_1"), { remaining: 4, lastRefillAt: 0, lowThreshold: 1 });
    t.equal(await stores.identities.refundCredits("ws_a", "id_none", 4, at(50)), null, "an identity without a balance: nothing");
    t.equal(await stores.identities.getCredits("ws_a", "id_none"), null);
    const unlimited = await stores.ratelimitCounters.applyChecks("ws_a", [], at(60), { keyId: "key_1", identityId: "id_none", cost: 1 });
    t.same(unlimited.credit, { passed: true, remaining: null }, "an identity without a balance is unlimited");
  });

  await t.test("credit balances keep their low threshold through spends, refills and refunds", async (t) => {
    const stores = await open(t);
    const day = Date.UTC(2026, 2, 6);
    await withBalance(stores, "key_1", { remaining: 2, refill: { interval: "daily", amount: 10 }, lastRefillAt: day - 1, lowThreshold: 3 });
    await stores.ratelimitCounters.applyChecks("ws_a", [], day + 1, { keyId: "key_1", cost: 4 });
    t.same(await stores.keys.getCredits("ws_a", "key_1"), {
      remaining: 6,
      refill: { interval: "daily", amount: 10 },
      lastRefillAt: day,
      lowThreshold: 3,
    });
    await stores.keys.refundCredits("ws_a", "key_1", 1, day + 2);
    t.equal((await stores.keys.getCredits("ws_a", "key_1"))?.lowThreshold, 3);
  });

  await t.test("credit refunds: a key without a balance (unlimited, or removed) is left alone, and none is created", async (t) => {
    const stores = await open(t);
    await withBalance(stores, "key_unlimited", null);
    await withBalance(stores, "key_removed", { remaining: 5, lastRefillAt: 0 });
    await stores.keys.remove("ws_a", "key_removed");
    t.equal(await stores.keys.refundCredits("ws_a", "key_unlimited", 3, at(1)), null);
    t.equal(await stores.keys.refundCredits("ws_a", "key_removed", 3, at(1)), null);
    t.equal(await stores.keys.getCredits("ws_a", "key_unlimited"), null, "still unlimited");
    t.equal(await stores.keys.getCredits("ws_a", "key_removed"), null, "still gone");
    t.equal(await stores.keys.get("ws_a", "key_removed"), null);
  });

  await t.test("credit refunds: many at once, among as many spends on the same key, all count", async (t) => {
    const stores = await open(t);
    await withBalance(stores, "key_1", { remaining: 100, lastRefillAt: 0 });
    const spends = Array.from({ length: 400 }, (_, i) =>
      stores.ratelimitCounters.applyChecks("ws_a", [check("k", 1_000_000)], at(i % 1_000), { keyId: "key_1", cost: 1 }),
    );
    const refunds = Array.from({ length: 400 }, (_, i) => stores.keys.refundCredits("ws_a", "key_1", 1 + (i % 3), at(i % 1_000)));
    const [spent, refunded] = await Promise.all([Promise.all(spends), Promise.all(refunds)]);
    const taken = spent.filter((outcome) => outcome.passed).length;
    const given = Array.from({ length: 400 }, (_, i) => 1 + (i % 3)).reduce((sum, amount) => sum + amount, 0);
    t.ok(
      refunded.every((balance) => typeof balance === "number"),
      "every refund reports a balance",
    );
    t.equal((await stores.keys.getCredits("ws_a", "key_1"))?.remaining, 100 - taken + given, `100 - ${taken} spent + ${given} given back`);
  });
}
