import t from "tap";
import { assertError, checkUnauthenticated } from "../helpers/assertions.js";
import { harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

for (const storage of STORAGE_KINDS) {
  t.test(`keygate.listApis on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage });
    const orders = (await h.call("apis.createApi", { name: "orders" })).body.data.apiId as string;
    const billing = (await h.call("apis.createApi", { name: "billing" })).body.data.apiId as string;
    const gone = (await h.call("apis.createApi", { name: "gone" })).body.data.apiId as string;
    await h.call("apis.deleteApi", { apiId: gone });
    await h.call("apis.createApi", { name: "theirs" }, { rootKey: OTHER_ROOT_KEY });

    await t.test("lists the workspace's live APIs by id, none of another workspace", async (t) => {
      const listed = await h.call("keygate.listApis", {});
      t.equal(listed.status, 200);
      const expected = [
        { id: orders, name: "orders" },
        { id: billing, name: "billing" },
      ].sort((a, b) => (a.id < b.id ? -1 : 1));
      t.same(
        listed.body.data.map(({ id, name }: { id: string; name: string }) => ({ id, name })),
        expected,
      );
      for (const api of listed.body.data) {
        t.equal(api.keySpaceId, (await h.app.stores.apis.get("ws_test", api.id))?.keySpaceId, "with its key space");
      }
    });

    await t.test("a root key reading one API lists that one; one reading none is refused", async (t) => {
      const one = await h.rootKey([`api.${billing}.read_api`]);
      t.match((await h.call("keygate.listApis", {}, { rootKey: one })).body.data, [{ id: billing, name: "billing" }]);
      t.equal((await h.call("keygate.listApis", {}, { rootKey: one })).body.data.length, 1);
      const none = await h.rootKey(["api.*.create_key"]);
      assertError(
        t,
        await h.call("keygate.listApis", {}, { rootKey: none }),
        "err:unkey:authorization:insufficient_permissions",
        /api\.\*\.read_api/,
      );
      t.equal((await h.call("keygate.listApis", {}, { rootKey: await h.rootKey(["api.*"]) })).status, 200);
    });

    await t.test("unknown fields are a located 400", async (t) => {
      const response = await h.call("keygate.listApis", { workspaceId: "ws_other" });
      t.equal(response.status, 400);
      t.equal(response.body.error.errors[0].location, "body.workspaceId");
    });

    await checkUnauthenticated(t, h, "keygate.listApis", {});
  });
}
