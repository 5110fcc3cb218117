import t from "tap";
import { assertError, checkUnauthenticated } from "../helpers/assertions.js";
import { harness, OTHER_ROOT_KEY, STORAGE_KINDS, WORKSPACE } from "../helpers/harness.js";

for (const storage of STORAGE_KINDS) {
  t.test(`keygate.listRatelimitNamespaces on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage });
    const use = (namespace: string, rootKey?: string) =>
      h.call("ratelimit.limit", { namespace, identifier: "someone", limit: 10, duration: 60_000 }, rootKey ? { rootKey } : {});
    const idOf = async (name: string) => (await h.app.stores.ratelimitNamespaces.findNamespaceByName(WORKSPACE, name))?.id as string;
    await use("search");
    await use("uploads");
    await use("retired");
    await h.app.services.ratelimit.deleteNamespace(WORKSPACE, "retired");
    await use("theirs", OTHER_ROOT_KEY);
    const search = await idOf("search");
    const uploads = await idOf("uploads");

    await t.test("lists the workspace's live namespaces by id with their names, none of another workspace", async (t) => {
      const listed = await h.call("keygate.listRatelimitNamespaces", {});
      t.equal(listed.status, 200);
      const expected = [
        { id: search, name: "search" },
        { id: uploads, name: "uploads" },
      ].sort((a, b) => (a.id < b.id ? -1 : 1));
      t.same(
        listed.body.data.map(({ id, name }: { id: string; name: string }) => ({ id, name })),
        expected,
      );
      for (const namespace of listed.body.data) t.type(namespace.createdAt, "number", "with its creation time");
    });

    await t.test("a root key reading one namespace lists that one; one reading none is refused", async (t) => {
      const one = await h.rootKey([`ratelimit.${uploads}.read_namespace`]);
      t.same(
        (await h.call("keygate.listRatelimitNamespaces", {}, { rootKey: one })).body.data.map(
          (namespace: { name: string }) => namespace.name,
        ),
        ["uploads"],
      );
      const none = await h.rootKey(["ratelimit.*.limit"]);
      assertError(
        t,
        await h.call("keygate.listRatelimitNamespaces", {}, { rootKey: none }),
        "err:unkey:authorization:insufficient_permissions",
        /ratelimit\.\*\.read_namespace/,
      );
      t.equal((await h.call("keygate.listRatelimitNamespaces", {}, { rootKey: await h.rootKey(["ratelimit.*"]) })).body.data.length, 2);
    });

    await t.test("unknown fields are a located 400", async (t) => {
      const response = await h.call("keygate.listRatelimitNamespaces", { workspaceId: "ws_other" });
      t.equal(response.status, 400);
      t.equal(response.body.error.errors[0].location, "body.workspaceId");
    });

    await checkUnauthenticated(t, h, "keygate.listRatelimitNamespaces", {});
  });
}
