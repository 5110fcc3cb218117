import t from "tap";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { createApi, createKey, getKey } from "../helpers/fixtures.js";
import { harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

for (const storage of STORAGE_KINDS) {
  t.test(`permissions.* (permissions) on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage });

    await t.test("create, then get by id and by slug", async (t) => {
      const created = await h.call("permissions.createPermission", {
        name: "Read documents",
        slug: "documents.read",
        description: "May read",
      });
      t.equal(created.status, 200);
      t.match(created.body.data.permissionId, /^perm_/);
      const expected = { id: created.body.data.permissionId, name: "Read documents", slug: "documents.read", description: "May read" };
      t.same((await h.call("permissions.getPermission", { permission: expected.id })).body.data, expected);
      t.same((await h.call("permissions.getPermission", { permission: "documents.read" })).body.data, expected);
      const bare = await h.call("permissions.createPermission", { name: "bare", slug: "bare.one" });
      t.same(Object.keys((await h.call("permissions.getPermission", { permission: bare.body.data.permissionId })).body.data).sort(), [
        "id",
        "name",
        "slug",
      ]);
    });

    await t.test("a taken slug is a 409; concurrent creates give one success and 409s", async (t) => {
      assertError(
        t,
        await h.call("permissions.createPermission", { name: "again", slug: "documents.read" }),
        "err:unkey:data:permission_already_exists",
        /documents\.read/,
      );
      const results = await Promise.all(
        Array.from({ length: 12 }, () => h.call("permissions.createPermission", { name: "race", slug: "race.slug" })),
      );
      t.equal(results.filter((r) => r.status === 200).length, 1);
      for (const result of results.filter((r) => r.status !== 200)) assertError(t, result, "err:unkey:data:permission_already_exists");
      t.equal(
        (await h.call("permissions.createPermission", { name: "x", slug: "documents.read" }, { rootKey: OTHER_ROOT_KEY })).status,
        200,
        "another workspace has its own slugs",
      );
    });

    await t.test("list pages through every permission exactly once, and search filters", async (t) => {
      for (let i = 0; i < 23; i++) await h.call("permissions.createPermission", { name: `Bulk ${i}`, slug: `bulk.p${i}` });
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await h.call("permissions.listPermissions", { limit: 7, ...(cursor ? { cursor } : {}) });
        seen.push(...page.body.data.map((p: any) => p.slug));
        cursor = page.body.pagination.cursor;
        t.equal(page.body.pagination.hasMore, cursor !== undefined);
      } while (cursor);
      t.equal(new Set(seen).size, seen.length);
      t.ok(seen.filter((slug) => slug.startsWith("bulk.")).length === 23);
      const found = await h.call("permissions.listPermissions", { search: "BULK 1" });
      t.same(found.body.data.map((p: any) => p.slug).sort(), [
        "bulk.p1",
        "bulk.p10",
        "bulk.p11",
        "bulk.p12",
        "bulk.p13",
        "bulk.p14",
        "bulk.p15",
        "bulk.p16",
        "bulk.p17",
        "bulk.p18",
        "bulk.p19",
      ]);
      t.same(
        (await h.call("permissions.listPermissions", {}, { rootKey: OTHER_ROOT_KEY })).body.data.map((p: any) => p.slug),
        ["documents.read"],
        "only the workspace's own",
      );
    });

    await t.test("delete removes the permission from every key and role", async (t) => {
      const apiId = await createApi(h);
      await h.call("permissions.createRole", { name: "holder", permissions: ["doomed.permission", "kept.permission"] });
      const { keyId } = await createKey(h, apiId, { permissions: ["doomed.permission", "kept.permission"], roles: ["holder"] });
      const result = await h.call("permissions.deletePermission", { permission: "doomed.permission" });
      t.equal(result.status, 200);
      t.same(result.body.data, {});
      t.same((await getKey(h, keyId)).permissions, ["kept.permission"]);
      t.same(
        (await h.call("permissions.getRole", { role: "holder" })).body.data.permissions.map((p: any) => p.slug),
        ["kept.permission"],
      );
      assertError(t, await h.call("permissions.getPermission", { permission: "doomed.permission" }), "err:unkey:data:permission_not_found");
      assertError(
        t,
        await h.call("permissions.deletePermission", { permission: "doomed.permission" }),
        "err:unkey:data:permission_not_found",
      );
      const recreated = await h.call("permissions.createPermission", { name: "back", slug: "doomed.permission" });
      t.equal(recreated.status, 200, "the slug is free again");
      t.same((await getKey(h, keyId)).permissions, ["kept.permission"], "and the old keys do not get the new one");
    });

    await t.test("another workspace's permission is 404", async (t) => {
      const theirs = (await h.call("permissions.createPermission", { name: "t", slug: "their.own" }, { rootKey: OTHER_ROOT_KEY })).body.data
        .permissionId;
      assertError(t, await h.call("permissions.getPermission", { permission: theirs }), "err:unkey:data:permission_not_found");
      assertError(t, await h.call("permissions.deletePermission", { permission: theirs }), "err:unkey:data:permission_not_found");
    });

    await t.test("bad bodies are located 400s", async (t) => {
      assertInvalidAt(t, await h.call("permissions.createPermission", { slug: "a.b" }), "body.name", "is required");
      assertInvalidAt(
        t,
        await h.call("permissions.createPermission", { name: "", slug: "a.b" }),
        "body.name",
        "must be at least 1 character long",
      );
      assertInvalidAt(
        t,
        await h.call("permissions.createPermission", { name: "n".repeat(513), slug: "a.b" }),
        "body.name",
        "must be at most 512 characters long",
      );
      assertInvalidAt(t, await h.call("permissions.createPermission", { name: "n" }), "body.slug", "is required");
      assertInvalidAt(
        t,
        await h.call("permissions.createPermission", { name: "n", slug: "has space" }),
        "body.slug",
        /^must contain only /,
      );
      assertInvalidAt(
        t,
        await h.call("permissions.createPermission", { name: "n", slug: "s".repeat(129) }),
        "body.slug",
        "must be at most 128 characters long",
      );
      assertInvalidAt(
        t,
        await h.call("permissions.createPermission", { name: "n", slug: "a.b", description: "d".repeat(513) }),
        "body.description",
        "must be at most 512 characters long",
      );
      assertInvalidAt(t, await h.call("permissions.getPermission", {}), "body.permission", "is required");
      assertInvalidAt(t, await h.call("permissions.listPermissions", { limit: 0 }), "body.limit", "must be greater than or equal to 1");
      assertInvalidAt(t, await h.call("permissions.listPermissions", { limit: 101 }), "body.limit", "must be less than or equal to 100");
      assertInvalidAt(
        t,
        await h.call("permissions.deletePermission", { permission: "" }),
        "body.permission",
        "must be at least 1 character long",
      );
    });

    await t.test(
      "a permission is addressed by 1-128 characters of a slug (official schema): beyond is 400, within is 404 when unknown",
      async (t) => {
        for (const procedure of ["permissions.getPermission", "permissions.deletePermission"]) {
          assertInvalidAt(
            t,
            await h.call(procedure, { permission: "p".repeat(129) }),
            "body.permission",
            "must be at most 128 characters long",
          );
          assertInvalidAt(t, await h.call(procedure, { permission: "has space" }), "body.permission");
          assertError(t, await h.call(procedure, { permission: "p".repeat(128) }), "err:unkey:data:permission_not_found");
        }
        const longest = "s".repeat(128);
        t.equal((await h.call("permissions.createPermission", { name: "longest", slug: longest })).status, 200);
        t.equal(
          (await h.call("permissions.getPermission", { permission: longest })).body.data.slug,
          longest,
          "the longest slug createPermission takes can be read back",
        );
      },
    );

    for (const [procedure, body, action] of [
      ["permissions.createPermission", { name: "n", slug: "auth.check" }, "create_permission"],
      ["permissions.getPermission", { permission: "documents.read" }, "read_permission"],
      ["permissions.listPermissions", {}, "read_permission"],
    ] as const) {
      await checkUnauthenticated(t, h, procedure, body);
      await checkPermissions(
        t,
        h,
        procedure,
        () =>
          procedure === "permissions.createPermission" ? { name: "n", slug: `auth.check.${Math.random().toString(36).slice(2)}` } : body,
        {
          missing: [`rbac.*.${action}`],
          accepted: [[`rbac.*.${action}`], ["rbac.*"]],
        },
      );
    }
    await checkUnauthenticated(t, h, "permissions.deletePermission", { permission: "x.y" });
    let victim = 0;
    await checkPermissions(
      t,
      h,
      "permissions.deletePermission",
      async () => {
        const slug = `victim.${victim++}`;
        await h.call("permissions.createPermission", { name: slug, slug });
        return { permission: slug };
      },
      { missing: ["rbac.*.delete_permission"], accepted: [["rbac.*.delete_permission"]] },
    );
  });

  t.test(`permissions.* (roles) on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage });

    await t.test("createRole with permissions; getRole by id and by name shows them", async (t) => {
      const created = await h.call("permissions.createRole", {
        name: "editor",
        description: "Edits",
        permissions: ["docs.read", "docs.write"],
      });
      t.equal(created.status, 200);
      t.match(created.body.data.roleId, /^role_/);
      for (const role of [created.body.data.roleId, "editor", "EDITOR"]) {
        const read = await h.call("permissions.getRole", { role });
        t.equal(read.body.data.id, created.body.data.roleId);
        t.equal(read.body.data.description, "Edits");
        t.same(
          read.body.data.permissions.map((p: any) => p.slug),
          ["docs.read", "docs.write"],
        );
      }
    });

    await t.test("a taken name, in any case, is a 409; concurrent creates give one success", async (t) => {
      assertError(t, await h.call("permissions.createRole", { name: "Editor" }), "err:unkey:data:role_already_exists", /Editor/);
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) => h.call("permissions.createRole", { name: i % 2 ? "Racer" : "racer" })),
      );
      t.equal(results.filter((r) => r.status === 200).length, 1);
      t.equal(results.filter((r) => r.status === 409).length, 11);
    });

    await t.test("createRole with permissions needs add_permission_to_role, and create_permission for new ones", async (t) => {
      const onlyCreate = await h.rootKey(["rbac.*.create_role"]);
      assertError(
        t,
        await h.call("permissions.createRole", { name: "r1", permissions: ["docs.read"] }, { rootKey: onlyCreate }),
        "err:unkey:authorization:insufficient_permissions",
        /add_permission_to_role/,
      );
      const noNew = await h.rootKey(["rbac.*.create_role", "rbac.*.add_permission_to_role"]);
      t.equal((await h.call("permissions.createRole", { name: "r2", permissions: ["docs.read"] }, { rootKey: noNew })).status, 200);
      assertError(
        t,
        await h.call("permissions.createRole", { name: "r3", permissions: ["brand.new"] }, { rootKey: noNew }),
        "err:unkey:authorization:insufficient_permissions",
        /create_permission/,
      );
      assertError(t, await h.call("permissions.getRole", { role: "r3" }), "err:unkey:data:role_not_found", undefined);
    });

    await t.test("setRolePermissions replaces them and answers the new list", async (t) => {
      const result = await h.call("permissions.setRolePermissions", { roleId: "editor", permissions: ["docs.read", "docs.admin"] });
      t.equal(result.status, 200);
      t.same(
        result.body.data.map((p: any) => p.slug),
        ["docs.read", "docs.admin"],
      );
      t.same(
        (await h.call("permissions.getRole", { role: "editor" })).body.data.permissions.map((p: any) => p.slug),
        ["docs.read", "docs.admin"],
      );
      t.same((await h.call("permissions.setRolePermissions", { roleId: "editor", permissions: [] })).body.data, []);
      t.notOk("permissions" in (await h.call("permissions.getRole", { role: "editor" })).body.data);
      assertError(t, await h.call("permissions.setRolePermissions", { roleId: "ghost", permissions: [] }), "err:unkey:data:role_not_found");
    });

    await t.test("setRolePermissions takes the official role identifier: 3-255 letters, digits, _ and -", async (t) => {
      const set = (roleId: string) => h.call("permissions.setRolePermissions", { roleId, permissions: [] });
      assertInvalidAt(t, await set("aa"), "body.roleId", "must be at least 3 characters long");
      assertInvalidAt(t, await set("r".repeat(256)), "body.roleId", "must be at most 255 characters long");
      for (const bad of ["role.dotted", "has space", "role:x", "star*"]) assertInvalidAt(t, await set(bad), "body.roleId");
      assertError(t, await set("abc"), "err:unkey:data:role_not_found");
      assertError(t, await set("r".repeat(255)), "err:unkey:data:role_not_found");
      const created = (await h.call("permissions.createRole", { name: "ed-1_x" })).body.data.roleId;
      t.equal((await set(created)).status, 200, "by id");
      t.equal((await set("ed-1_x")).status, 200, "and by a name that fits the identifier rules");
    });

    await t.test("a role's permissions take slugs of up to 128 characters, as createPermission does", async (t) => {
      const longest = "q".repeat(128);
      const result = await h.call("permissions.setRolePermissions", { roleId: "editor", permissions: [longest] });
      t.equal(result.status, 200);
      t.same(
        result.body.data.map((p: any) => p.slug),
        [longest],
      );
      assertInvalidAt(
        t,
        await h.call("permissions.setRolePermissions", { roleId: "editor", permissions: ["q".repeat(129)] }),
        "body.permissions[0]",
        "must be at most 128 characters long",
      );
    });

    await t.test("listRoles pages and searches", async (t) => {
      for (let i = 0; i < 9; i++) await h.call("permissions.createRole", { name: `bulk_role_${i}` });
      const first = await h.call("permissions.listRoles", { limit: 4 });
      t.equal(first.body.data.length, 4);
      t.equal(first.body.pagination.hasMore, true);
      const all: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await h.call("permissions.listRoles", { limit: 4, ...(cursor ? { cursor } : {}) });
        all.push(...page.body.data.map((r: any) => r.name));
        cursor = page.body.pagination.cursor;
      } while (cursor);
      t.equal(new Set(all).size, all.length);
      t.equal(all.filter((name) => name.startsWith("bulk_role_")).length, 9);
      t.equal((await h.call("permissions.listRoles", { search: "BULK_ROLE" })).body.data.length, 9);
    });

    await t.test("deleteRole removes it from keys; the name is free again", async (t) => {
      const apiId = await createApi(h);
      await h.call("permissions.createRole", { name: "temporary" });
      const { keyId } = await createKey(h, apiId, { roles: ["temporary", "editor"] });
      t.same((await h.call("permissions.deleteRole", { role: "temporary" })).body.data, {});
      t.same((await getKey(h, keyId)).roles, ["editor"]);
      assertError(t, await h.call("permissions.deleteRole", { role: "temporary" }), "err:unkey:data:role_not_found");
      t.equal((await h.call("permissions.createRole", { name: "temporary" })).status, 200);
    });

    await t.test("another workspace's role is 404", async (t) => {
      const theirs = (await h.call("permissions.createRole", { name: "theirs" }, { rootKey: OTHER_ROOT_KEY })).body.data.roleId;
      assertError(t, await h.call("permissions.getRole", { role: theirs }), "err:unkey:data:role_not_found");
      assertError(t, await h.call("permissions.deleteRole", { role: "theirs" }), "err:unkey:data:role_not_found");
      assertError(t, await h.call("permissions.setRolePermissions", { roleId: theirs, permissions: [] }), "err:unkey:data:role_not_found");
    });

    await t.test("bad bodies are located 400s", async (t) => {
      assertInvalidAt(t, await h.call("permissions.createRole", {}), "body.name", "is required");
      assertInvalidAt(t, await h.call("permissions.createRole", { name: "bad name" }), "body.name", /^must contain only /);
      assertInvalidAt(
        t,
        await h.call("permissions.createRole", { name: "r".repeat(129) }),
        "body.name",
        "must be at most 128 characters long",
      );
      assertInvalidAt(
        t,
        await h.call("permissions.createRole", { name: "ok", description: "d".repeat(513) }),
        "body.description",
        "must be at most 512 characters long",
      );
      assertInvalidAt(
        t,
        await h.call("permissions.createRole", { name: "ok", permissions: ["p".repeat(129)] }),
        "body.permissions[0]",
        "must be at most 128 characters long",
      );
      for (const procedure of ["permissions.getRole", "permissions.deleteRole"]) {
        assertInvalidAt(t, await h.call(procedure, { role: "r".repeat(129) }), "body.role", "must be at most 128 characters long");
        assertError(t, await h.call(procedure, { role: "r".repeat(128) }), "err:unkey:data:role_not_found");
      }
      assertInvalidAt(
        t,
        await h.call("permissions.createRole", { name: "ok", permissions: ["bad slug"] }),
        "body.permissions[0]",
        /^must contain only /,
      );
      assertInvalidAt(t, await h.call("permissions.getRole", {}), "body.role", "is required");
      assertInvalidAt(t, await h.call("permissions.setRolePermissions", { roleId: "editor" }), "body.permissions", "is required");
      assertInvalidAt(t, await h.call("permissions.listRoles", { cursor: 5 }), "body.cursor", "must be a string");
    });

    for (const [procedure, body, action] of [
      ["permissions.getRole", { role: "editor" }, "read_role"],
      ["permissions.listRoles", {}, "read_role"],
    ] as const) {
      await checkUnauthenticated(t, h, procedure, body);
      await checkPermissions(t, h, procedure, () => body, { missing: [`rbac.*.${action}`], accepted: [[`rbac.*.${action}`]] });
    }
    let n = 0;
    await checkUnauthenticated(t, h, "permissions.createRole", { name: "x" });
    await checkPermissions(t, h, "permissions.createRole", () => ({ name: `auth_role_${n++}` }), {
      missing: ["rbac.*.create_role"],
      accepted: [["rbac.*.create_role"]],
    });
    await checkUnauthenticated(t, h, "permissions.deleteRole", { role: "x" });
    await checkPermissions(
      t,
      h,
      "permissions.deleteRole",
      async () => {
        const name = `doomed_role_${n++}`;
        await h.call("permissions.createRole", { name });
        return { role: name };
      },
      { missing: ["rbac.*.delete_role"], accepted: [["rbac.*.delete_role"]] },
    );
    await checkUnauthenticated(t, h, "permissions.setRolePermissions", { roleId: "editor", permissions: [] });
    await checkPermissions(t, h, "permissions.setRolePermissions", () => ({ roleId: "editor", permissions: ["docs.read"] }), {
      missing: ["rbac.*.add_permission_to_role", "rbac.*.remove_permission_from_role"],
      accepted: [["rbac.*.add_permission_to_role", "rbac.*.remove_permission_from_role"]],
    });
  });
}
