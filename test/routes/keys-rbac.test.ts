import t from "tap";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { createApi, createKey, getKey } from "../helpers/fixtures.js";
import { harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

const slugs = (permissions: any[]) => permissions.map((p) => p.slug);

for (const storage of STORAGE_KINDS) {
  t.test(`keys.add/remove/setPermissions on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage });
    const apiId = await createApi(h);
    await h.call("permissions.createPermission", { name: "Read", slug: "docs.read" });
    await h.call("permissions.createPermission", { name: "Write", slug: "docs.write" });

    await t.test("add merges, is idempotent and answers the key's direct permissions", async (t) => {
      const { keyId } = await createKey(h, apiId, { permissions: ["docs.read"] });
      const added = await h.call("keys.addPermissions", { keyId, permissions: ["docs.write", "docs.read"] });
      t.equal(added.status, 200);
      t.same(slugs(added.body.data), ["docs.read", "docs.write"]);
      t.same(Object.keys(added.body.data[0]).sort(), ["id", "name", "slug"]);
      t.same(slugs((await h.call("keys.addPermissions", { keyId, permissions: ["docs.write"] })).body.data), ["docs.read", "docs.write"]);
      t.same((await getKey(h, keyId)).permissions, ["docs.read", "docs.write"]);
    });

    await t.test("add creates unknown permissions when the root key may create them", async (t) => {
      const { keyId } = await createKey(h, apiId);
      const added = await h.call("keys.addPermissions", { keyId, permissions: ["fresh.permission"] });
      t.same(slugs(added.body.data), ["fresh.permission"]);
      const rootKey = await h.rootKey(["api.*.update_key", "rbac.*.add_permission_to_key"]);
      const denied = await h.call("keys.addPermissions", { keyId, permissions: ["another.new.one"] }, { rootKey });
      assertError(t, denied, "err:unkey:authorization:insufficient_permissions", /rbac\.\*\.create_permission/);
      t.equal((await h.call("permissions.getPermission", { permission: "another.new.one" })).status, 404, "nothing was created");
      t.equal(
        (await h.call("keys.addPermissions", { keyId, permissions: ["docs.read"] }, { rootKey })).status,
        200,
        "existing ones need no create_permission",
      );
    });

    await t.test("remove takes permissions away; an unknown slug is a 404 and changes nothing", async (t) => {
      const { keyId } = await createKey(h, apiId, { permissions: ["docs.read", "docs.write"] });
      t.same(slugs((await h.call("keys.removePermissions", { keyId, permissions: ["docs.read"] })).body.data), ["docs.write"]);
      assertError(
        t,
        await h.call("keys.removePermissions", { keyId, permissions: ["docs.write", "never.existed"] }),
        "err:unkey:data:permission_not_found",
        /never\.existed/,
      );
      t.same((await getKey(h, keyId)).permissions, ["docs.write"]);
      t.same(
        (await h.call("keys.removePermissions", { keyId, permissions: ["docs.read"] })).body.data.length,
        1,
        "removing one the key lacks is fine",
      );
    });

    await t.test("set replaces the direct permissions, and may empty them", async (t) => {
      const { keyId } = await createKey(h, apiId, { permissions: ["docs.read"] });
      t.same(slugs((await h.call("keys.setPermissions", { keyId, permissions: ["docs.write", "set.new"] })).body.data), [
        "docs.write",
        "set.new",
      ]);
      t.same((await h.call("keys.setPermissions", { keyId, permissions: [] })).body.data, []);
      t.notOk("permissions" in (await getKey(h, keyId)));
    });

    await t.test("bad bodies are located 400s; unknown keys 404", async (t) => {
      const { keyId } = await createKey(h, apiId);
      for (const procedure of ["keys.addPermissions", "keys.removePermissions"]) {
        assertInvalidAt(t, await h.call(procedure, { keyId, permissions: [] }), "body.permissions", "must contain at least 1 item");
        assertInvalidAt(t, await h.call(procedure, { keyId }), "body.permissions", "is required");
        assertInvalidAt(t, await h.call(procedure, { keyId, permissions: ["bad slug"] }), "body.permissions[0]", /^must contain only /);
        assertInvalidAt(
          t,
          await h.call(procedure, { keyId, permissions: Array.from({ length: 1001 }, (_, i) => `p${i}`) }),
          "body.permissions",
          "must contain at most 1000 items",
        );
        assertError(t, await h.call(procedure, { keyId: "key_missing", permissions: ["docs.read"] }), "err:unkey:data:key_not_found");
        assertError(
          t,
          await h.call(procedure, { keyId, permissions: ["docs.read"] }, { rootKey: OTHER_ROOT_KEY }),
          "err:unkey:data:key_not_found",
        );
      }
      assertInvalidAt(t, await h.call("keys.setPermissions", { keyId, permissions: "docs.read" }), "body.permissions", "must be an array");
    });

    const target = await createKey(h, apiId);
    await checkUnauthenticated(t, h, "keys.addPermissions", { keyId: target.keyId, permissions: ["docs.read"] });
    await checkPermissions(t, h, "keys.addPermissions", () => ({ keyId: target.keyId, permissions: ["docs.read"] }), {
      missing: ["api.*.update_key", "rbac.*.add_permission_to_key"],
      accepted: [
        ["api.*.update_key", "rbac.*.add_permission_to_key"],
        [`api.${apiId}.update_key`, "rbac.*.add_permission_to_key"],
      ],
    });
    await checkUnauthenticated(t, h, "keys.removePermissions", { keyId: target.keyId, permissions: ["docs.read"] });
    await checkPermissions(t, h, "keys.removePermissions", () => ({ keyId: target.keyId, permissions: ["docs.read"] }), {
      missing: ["api.*.update_key", "rbac.*.remove_permission_from_key"],
      accepted: [["api.*.update_key", "rbac.*.remove_permission_from_key"]],
    });
    await checkUnauthenticated(t, h, "keys.setPermissions", { keyId: target.keyId, permissions: [] });
    await checkPermissions(t, h, "keys.setPermissions", () => ({ keyId: target.keyId, permissions: ["docs.read"] }), {
      missing: ["api.*.update_key", "rbac.*.add_permission_to_key", "rbac.*.remove_permission_from_key"],
      accepted: [["api.*.update_key", "rbac.*.add_permission_to_key", "rbac.*.remove_permission_from_key"]],
    });
  });

  t.test(`keys.add/remove/setRoles on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage });
    const apiId = await createApi(h);
    const admin = (await h.call("permissions.createRole", { name: "admin", description: "All of it", permissions: ["x.read", "x.write"] }))
      .body.data.roleId;
    await h.call("permissions.createRole", { name: "viewer" });

    await t.test("add answers the key's roles with their permissions; roles are found by name or id", async (t) => {
      const { keyId } = await createKey(h, apiId);
      const added = await h.call("keys.addRoles", { keyId, roles: ["viewer", admin] });
      t.equal(added.status, 200);
      const byName = Object.fromEntries(added.body.data.map((role: any) => [role.name, role]));
      t.same(Object.keys(byName).sort(), ["admin", "viewer"]);
      t.same(slugs(byName.admin.permissions), ["x.read", "x.write"]);
      t.equal(byName.admin.description, "All of it");
      t.notOk("permissions" in byName.viewer, "a role without permissions has no permissions field");
      t.same((await getKey(h, keyId)).roles.sort(), ["admin", "viewer"]);
      t.same(
        (await h.call("keys.addRoles", { keyId, roles: ["ADMIN"] })).body.data.length,
        2,
        "names ignore case; adding again changes nothing",
      );
    });

    await t.test("remove and set; unknown roles are 404 and change nothing", async (t) => {
      const { keyId } = await createKey(h, apiId, { roles: ["admin", "viewer"] });
      t.same(
        (await h.call("keys.removeRoles", { keyId, roles: ["viewer"] })).body.data.map((r: any) => r.name),
        ["admin"],
      );
      assertError(t, await h.call("keys.removeRoles", { keyId, roles: ["nobody"] }), "err:unkey:data:role_not_found", /nobody/);
      assertError(t, await h.call("keys.addRoles", { keyId, roles: ["viewer", "nobody"] }), "err:unkey:data:role_not_found");
      assertError(t, await h.call("keys.setRoles", { keyId, roles: ["nobody"] }), "err:unkey:data:role_not_found");
      t.same((await getKey(h, keyId)).roles, ["admin"]);
      t.same(
        (await h.call("keys.setRoles", { keyId, roles: ["viewer"] })).body.data.map((r: any) => r.name),
        ["viewer"],
      );
      t.same((await h.call("keys.setRoles", { keyId, roles: [] })).body.data, []);
      t.notOk("roles" in (await getKey(h, keyId)));
    });

    await t.test("bad bodies are located 400s", async (t) => {
      const { keyId } = await createKey(h, apiId);
      assertInvalidAt(t, await h.call("keys.addRoles", { keyId, roles: [] }), "body.roles", "must contain at least 1 item");
      assertInvalidAt(t, await h.call("keys.removeRoles", { keyId, roles: [] }), "body.roles", "must contain at least 1 item");
      assertInvalidAt(
        t,
        await h.call("keys.setRoles", { keyId, roles: Array.from({ length: 101 }, (_, i) => `r${i}`) }),
        "body.roles",
        "must contain at most 100 items",
      );
      assertInvalidAt(t, await h.call("keys.addRoles", { keyId, roles: ["bad role"] }), "body.roles[0]", /^must contain only /);
      assertInvalidAt(t, await h.call("keys.setRoles", { keyId }), "body.roles", "is required");
    });

    const target = await createKey(h, apiId);
    await checkUnauthenticated(t, h, "keys.addRoles", { keyId: target.keyId, roles: ["viewer"] });
    await checkPermissions(t, h, "keys.addRoles", () => ({ keyId: target.keyId, roles: ["viewer"] }), {
      missing: ["api.*.update_key", "rbac.*.add_role_to_key"],
      accepted: [
        ["api.*.update_key", "rbac.*.add_role_to_key"],
        [`api.${apiId}.update_key`, "rbac.*.add_role_to_key"],
      ],
    });
    await checkUnauthenticated(t, h, "keys.removeRoles", { keyId: target.keyId, roles: ["viewer"] });
    await checkPermissions(t, h, "keys.removeRoles", () => ({ keyId: target.keyId, roles: ["viewer"] }), {
      missing: ["api.*.update_key"],
      accepted: [["api.*.update_key"], [`api.${apiId}.update_key`]],
    });
    await checkUnauthenticated(t, h, "keys.setRoles", { keyId: target.keyId, roles: [] });
    await checkPermissions(t, h, "keys.setRoles", () => ({ keyId: target.keyId, roles: ["viewer"] }), {
      missing: ["api.*.update_key"],
      accepted: [["api.*.update_key"], [`api.${apiId}.update_key`]],
    });
  });
}
