import t from "tap";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { createApi, createKey } from "../helpers/fixtures.js";
import { harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

// keys.deleteKey: soft and permanent deletes.

for (const storage of STORAGE_KINDS) {
  t.test(`keys.deleteKey on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage });
    const apiId = await createApi(h);

    await t.test("a soft delete hides the key; a second delete is 404", async (t) => {
      const { keyId } = await createKey(h, apiId);
      const result = await h.call("keys.deleteKey", { keyId });
      t.equal(result.status, 200);
      t.same(result.body.data, {});
      assertError(t, await h.call("keys.getKey", { keyId }), "err:unkey:data:key_not_found");
      assertError(t, await h.call("keys.deleteKey", { keyId }), "err:unkey:data:key_not_found");
      t.equal((await h.app.stores.keys.get("ws_test", keyId))?.deletedAt !== undefined, true, "the record stays, marked deleted");
    });

    await t.test("a permanent delete removes the record", async (t) => {
      const { keyId, key } = await createKey(h, apiId, { credits: { remaining: 3 } });
      t.equal((await h.call("keys.deleteKey", { keyId, permanent: true })).status, 200);
      t.equal(await h.app.stores.keys.get("ws_test", keyId), null);
      assertError(t, await h.call("keys.whoami", { key }), "err:unkey:data:key_not_found");
      assertError(t, await h.call("keys.deleteKey", { keyId, permanent: true }), "err:unkey:data:key_not_found");
    });

    await t.test("another workspace's key is 404 and stays", async (t) => {
      const { keyId } = await createKey(h, apiId);
      assertError(t, await h.call("keys.deleteKey", { keyId }, { rootKey: OTHER_ROOT_KEY }), "err:unkey:data:key_not_found");
      t.equal((await h.call("keys.getKey", { keyId })).status, 200);
    });

    await t.test("bad bodies are located 400s", async (t) => {
      assertInvalidAt(t, await h.call("keys.deleteKey", {}), "body.keyId", "is required");
      assertInvalidAt(t, await h.call("keys.deleteKey", { keyId: "key_1", permanent: "yes" }), "body.permanent", "must be a boolean");
    });

    await checkUnauthenticated(t, h, "keys.deleteKey", { keyId: "key_whatever" });
    await checkPermissions(t, h, "keys.deleteKey", async () => ({ keyId: (await createKey(h, apiId)).keyId }), {
      missing: ["api.*.delete_key", `api.${apiId}.delete_key`],
      accepted: [["api.*.delete_key"], [`api.${apiId}.delete_key`]],
    });
  });
}
