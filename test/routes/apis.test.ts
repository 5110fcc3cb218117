import t from "tap";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

for (const storage of STORAGE_KINDS) {
  t.test(`apis.* on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage });

    await t.test("createApi answers an api_ id that getApi reads back", async (t) => {
      const created = await h.call("apis.createApi", { name: "orders" });
      t.equal(created.status, 200);
      t.match(created.body.data.apiId, /^api_[1-9A-HJ-NP-Za-km-z]+$/);
      t.same(Object.keys(created.body), ["meta", "data"]);
      const read = await h.call("apis.getApi", { apiId: created.body.data.apiId });
      t.equal(read.status, 200);
      t.same(read.body.data, { id: created.body.data.apiId, name: "orders" });
    });

    await t.test("createApi also creates the API's key space", async (t) => {
      const created = await h.call("apis.createApi", { name: "billing" });
      const record = await h.app.stores.apis.get("ws_test", created.body.data.apiId);
      t.match(record?.keySpaceId, /^ks_/);
    });

    await t.test("createApi rejects each invalid name with a located message", async (t) => {
      assertInvalidAt(t, await h.call("apis.createApi", {}), "body.name", "is required");
      assertInvalidAt(t, await h.call("apis.createApi", { name: "ab" }), "body.name", "must be at least 3 characters long");
      assertInvalidAt(t, await h.call("apis.createApi", { name: "a".repeat(256) }), "body.name", "must be at most 255 characters long");
      assertInvalidAt(
        t,
        await h.call("apis.createApi", { name: "1orders" }),
        "body.name",
        "must start with a letter and contain only letters, digits, ., _ and -",
      );
      assertInvalidAt(
        t,
        await h.call("apis.createApi", { name: "or ders" }),
        "body.name",
        "must start with a letter and contain only letters, digits, ., _ and -",
      );
      assertInvalidAt(t, await h.call("apis.createApi", { name: 42 }), "body.name", "must be a string");
      assertInvalidAt(t, await h.call("apis.createApi", { name: "orders", extra: true }), "body.extra", "is not a known field");
    });

    await checkUnauthenticated(t, h, "apis.createApi", { name: "orders" });
    await checkPermissions(t, h, "apis.createApi", () => ({ name: "orders" }), {
      missing: ["api.*.create_api"],
      accepted: [["api.*.create_api"], ["apis.*.create_api"], ["*"]],
    });

    await t.test("getApi rejects each invalid apiId", async (t) => {
      assertInvalidAt(t, await h.call("apis.getApi", {}), "body.apiId", "is required");
      assertInvalidAt(t, await h.call("apis.getApi", { apiId: "api_1" }), "body.apiId", "must be at least 8 characters long");
      assertInvalidAt(t, await h.call("apis.getApi", { apiId: "api-1234567" }), "body.apiId", "must contain only letters, digits and _");
      assertInvalidAt(t, await h.call("apis.getApi", { apiId: "x".repeat(256) }), "body.apiId", "must be at most 255 characters long");
    });

    await t.test("getApi is 404 for an unknown id, another workspace's API and a deleted API", async (t) => {
      assertError(t, await h.call("apis.getApi", { apiId: "api_doesnotexist" }), "err:unkey:data:api_not_found", /api_doesnotexist/);
      const elsewhere = await h.call("apis.createApi", { name: "theirs" }, { rootKey: OTHER_ROOT_KEY });
      assertError(t, await h.call("apis.getApi", { apiId: elsewhere.body.data.apiId }), "err:unkey:data:api_not_found");
      const mine = await h.call("apis.createApi", { name: "short-lived" });
      t.equal((await h.call("apis.deleteApi", { apiId: mine.body.data.apiId })).status, 200);
      assertError(t, await h.call("apis.getApi", { apiId: mine.body.data.apiId }), "err:unkey:data:api_not_found");
    });

    const existing = (await h.call("apis.createApi", { name: "existing" })).body.data.apiId as string;
    await checkUnauthenticated(t, h, "apis.getApi", { apiId: existing });
    await checkPermissions(t, h, "apis.getApi", () => ({ apiId: existing }), {
      missing: ["api.*.read_api", `api.${existing}.read_api`],
      accepted: [["api.*.read_api"], [`api.${existing}.read_api`], [`apis.${existing}.read_api`], ["api.*"]],
    });

    await t.test("a permission for another API does not grant this one", async (t) => {
      const rootKey = await h.rootKey(["api.api_someotherapi.read_api"]);
      assertError(t, await h.call("apis.getApi", { apiId: existing }, { rootKey }), "err:unkey:authorization:insufficient_permissions");
    });

    await t.test("deleteApi answers {} and a second delete is 404", async (t) => {
      const api = (await h.call("apis.createApi", { name: "to-delete" })).body.data.apiId;
      const deleted = await h.call("apis.deleteApi", { apiId: api });
      t.equal(deleted.status, 200);
      t.same(deleted.body.data, {});
      assertError(t, await h.call("apis.deleteApi", { apiId: api }), "err:unkey:data:api_not_found");
    });

    await t.test("deleteApi is 404 for unknown ids and other workspaces' APIs, and leaves those alone", async (t) => {
      assertError(t, await h.call("apis.deleteApi", { apiId: "api_doesnotexist" }), "err:unkey:data:api_not_found");
      const theirs = (await h.call("apis.createApi", { name: "theirs" }, { rootKey: OTHER_ROOT_KEY })).body.data.apiId;
      assertError(t, await h.call("apis.deleteApi", { apiId: theirs }), "err:unkey:data:api_not_found");
      t.equal((await h.call("apis.getApi", { apiId: theirs }, { rootKey: OTHER_ROOT_KEY })).status, 200);
    });

    await t.test("deleteApi rejects an invalid apiId", async (t) => {
      assertInvalidAt(t, await h.call("apis.deleteApi", { apiId: "short" }), "body.apiId", "must be at least 8 characters long");
      assertInvalidAt(t, await h.call("apis.deleteApi", { apiId: "api_123456", force: true }), "body.force", "is not a known field");
    });

    await checkUnauthenticated(t, h, "apis.deleteApi", { apiId: existing });
    await checkPermissions(
      t,
      h,
      "apis.deleteApi",
      async () => ({ apiId: (await h.call("apis.createApi", { name: "victim" })).body.data.apiId }),
      {
        missing: ["api.*.delete_api"],
        accepted: [["api.*.delete_api"], ["api.*"]],
      },
    );
  });

  t.test(`declared APIs on ${storage} stores`, async (t) => {
    const h = await harness(t, {
      storage,
      config: {
        apis: [
          { id: "api_declared", name: "declared", workspaceId: "ws_test", deleteProtection: true },
          { id: "api_plain", name: "plain", workspaceId: "ws_test" },
        ],
      },
    });

    await t.test("are created at start-up and readable", async (t) => {
      const read = await h.call("apis.getApi", { apiId: "api_declared" });
      t.same(read.body.data, { id: "api_declared", name: "declared" });
    });

    await t.test("deleteApi answers 412 for an API with delete protection, and it stays", async (t) => {
      assertError(t, await h.call("apis.deleteApi", { apiId: "api_declared" }), "err:unkey:application:protected_resource", /api_declared/);
      t.equal((await h.call("apis.getApi", { apiId: "api_declared" })).status, 200);
    });

    await t.test("declaring again is idempotent and does not resurrect a deleted API", async (t) => {
      t.equal((await h.call("apis.deleteApi", { apiId: "api_plain" })).status, 200);
      t.equal(
        await h.app.services.apis.declare({ id: "api_plain", name: "plain", workspaceId: "ws_test", deleteProtection: false }),
        "exists",
      );
      t.equal(
        await h.app.services.apis.declare({ id: "api_declared", name: "declared", workspaceId: "ws_test", deleteProtection: true }),
        "exists",
      );
      assertError(t, await h.call("apis.getApi", { apiId: "api_plain" }), "err:unkey:data:api_not_found");
    });

    await t.test("an id declared for another workspace than its owner is refused", async (t) => {
      await t.rejects(
        h.app.services.apis.declare({ id: "api_declared", name: "declared", workspaceId: "ws_other", deleteProtection: false }),
        /already belongs to workspace 'ws_test'/,
      );
    });
  });
}
