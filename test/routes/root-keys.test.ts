import t from "tap";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

for (const storage of STORAGE_KINDS) {
  t.test(`keygate.*RootKey on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage });

    await t.test("createRootKey answers a key shown once that authenticates with exactly what it was given", async (t) => {
      const created = await h.call("keygate.createRootKey", { name: "ci", permissions: ["api.*.create_api"] });
      t.equal(created.status, 200);
      t.match(created.body.data, { rootKeyId: /^key_/, key: /^root_[1-9A-HJ-NP-Za-km-z]+$/ });
      const rootKey = created.body.data.key as string;
      t.equal((await h.call("apis.createApi", { name: "by-new-key" }, { rootKey })).status, 200);
      assertError(
        t,
        await h.call("apis.getApi", { apiId: "api_whatever1" }, { rootKey }),
        "err:unkey:authorization:insufficient_permissions",
      );
      const listed = await h.call("keygate.listRootKeys", {});
      const entry = listed.body.data.find((row: { rootKeyId: string }) => row.rootKeyId === created.body.data.rootKeyId);
      t.match(entry, { name: "ci", permissions: ["api.*.create_api"], createdAt: Number });
      t.notOk("key" in entry || "hash" in entry, "neither the key nor its hash is listed");
    });

    await t.test("a root key never grants a permission it does not hold", async (t) => {
      const parent = await h.rootKey(["root_key.*.create_root_key", "api.*.read_key", "api.api_one.*"]);
      const grant = (permissions: string[]) => h.call("keygate.createRootKey", { permissions }, { rootKey: parent });
      t.equal((await grant(["api.*.read_key"])).status, 200, "one it holds");
      t.equal((await grant(["apis.*.read_key"])).status, 200, "the apis. spelling of one it holds");
      t.equal((await grant(["api.api_two.read_key"])).status, 200, "a narrower one: one API of a wildcard");
      t.equal((await grant(["api.api_one.delete_key", "api.api_one.*"])).status, 200, "under a held prefix wildcard");
      t.equal((await grant(["root_key.*.create_root_key"])).status, 200, "its own right to create root keys");
      for (const wider of [["*"], ["api.*"], ["api.*.delete_key"], ["api.api_two.delete_key"], ["api.*.read_key", "rbac.*.create_role"]]) {
        const refused = await grant(wider);
        assertError(t, refused, "err:unkey:authorization:insufficient_permissions", /cannot grant a permission it does not hold/);
      }
      const before = (await h.call("keygate.listRootKeys", {})).body.data.length;
      await grant(["api.*.read_key", "api.*.delete_key"]);
      t.equal((await h.call("keygate.listRootKeys", {})).body.data.length, before, "a refused request stores nothing");
    });

    await t.test("createRootKey validates its body with located messages", async (t) => {
      assertInvalidAt(t, await h.call("keygate.createRootKey", {}), "body.permissions", "is required");
      assertInvalidAt(t, await h.call("keygate.createRootKey", { permissions: [] }), "body.permissions", /at least 1/);
      assertInvalidAt(t, await h.call("keygate.createRootKey", { permissions: ["api.*.read key"] }), "body.permissions[0]");
      assertInvalidAt(t, await h.call("keygate.createRootKey", { permissions: ["*"], expires: -1 }), "body.expires");
      assertInvalidAt(t, await h.call("keygate.createRootKey", { permissions: ["*"], workspaceId: "ws_x" }), "body.workspaceId");
    });

    await t.test("a root key is created in the caller's workspace only", async (t) => {
      const created = await h.call("keygate.createRootKey", { permissions: ["*"] }, { rootKey: OTHER_ROOT_KEY });
      const mine = (await h.call("keygate.listRootKeys", {})).body.data.map((row: { rootKeyId: string }) => row.rootKeyId);
      t.notOk(mine.includes(created.body.data.rootKeyId));
      const theirs = (await h.call("keygate.listRootKeys", {}, { rootKey: OTHER_ROOT_KEY })).body.data;
      t.ok(theirs.some((row: { rootKeyId: string }) => row.rootKeyId === created.body.data.rootKeyId));
      assertError(
        t,
        await h.call("keygate.deleteRootKey", { rootKeyId: created.body.data.rootKeyId }),
        "err:keygate:data:root_key_not_found",
      );
    });

    await t.test("deleteRootKey revokes: the key is refused at once, listed as revoked, and a second delete is 404", async (t) => {
      const created = (await h.call("keygate.createRootKey", { permissions: ["api.*.create_api"] })).body.data;
      t.equal((await h.call("apis.createApi", { name: "before-revoke" }, { rootKey: created.key })).status, 200);
      const deleted = await h.call("keygate.deleteRootKey", { rootKeyId: created.rootKeyId });
      t.equal(deleted.status, 200);
      t.same(deleted.body.data, {});
      assertError(
        t,
        await h.call("apis.createApi", { name: "after-revoke" }, { rootKey: created.key }),
        "err:unkey:authentication:key_not_found",
      );
      const listed = (await h.call("keygate.listRootKeys", {})).body.data.find(
        (row: { rootKeyId: string }) => row.rootKeyId === created.rootKeyId,
      );
      t.match(listed, { revokedAt: Number });
      assertError(t, await h.call("keygate.deleteRootKey", { rootKeyId: created.rootKeyId }), "err:keygate:data:root_key_not_found");
      assertError(t, await h.call("keygate.deleteRootKey", { rootKeyId: "key_doesnotexist" }), "err:keygate:data:root_key_not_found");
      assertError(t, await h.call("keygate.deleteRootKey", { rootKeyId: "config_root_key_0" }), "err:keygate:data:root_key_not_found");
    });

    await checkUnauthenticated(t, h, "keygate.createRootKey", { permissions: ["*"] });
    await checkUnauthenticated(t, h, "keygate.listRootKeys", {});
    await checkUnauthenticated(t, h, "keygate.deleteRootKey", { rootKeyId: "key_doesnotexist" });
    await checkPermissions(t, h, "keygate.createRootKey", () => ({ permissions: ["root_key.*.create_root_key"] }), {
      missing: ["root_key.*.create_root_key"],
      accepted: [["root_key.*.create_root_key"], ["root_key.*"], ["*"]],
    });
    await checkPermissions(t, h, "keygate.listRootKeys", () => ({}), {
      missing: ["root_key.*.read_root_key"],
      accepted: [["root_key.*.read_root_key"], ["root_key.*"], ["*"]],
    });
    await checkPermissions(
      t,
      h,
      "keygate.deleteRootKey",
      async () => ({ rootKeyId: (await h.call("keygate.createRootKey", { permissions: ["api.*.read_api"] })).body.data.rootKeyId }),
      { missing: ["root_key.*.delete_root_key"], accepted: [["root_key.*.delete_root_key"], ["root_key.*"], ["*"]] },
    );
  });
}
