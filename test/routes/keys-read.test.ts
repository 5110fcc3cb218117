import t from "tap";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { createApi, createKey, TEST_VAULT_KEY } from "../helpers/fixtures.js";
import { harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

for (const storage of STORAGE_KINDS) {
  t.test(`keys.getKey and keys.whoami on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage, config: { vault: { key: TEST_VAULT_KEY } } });
    const apiId = await createApi(h);
    const recoverable = await createKey(h, apiId, { recoverable: true, name: "rec" });
    const plain = await createKey(h, apiId, { name: "plain" });

    await t.test("getKey never shows the hash, and the plaintext only with decrypt", async (t) => {
      const without = await h.call("keys.getKey", { keyId: recoverable.keyId });
      t.equal(without.status, 200);
      t.notOk("plaintext" in without.body.data);
      t.notOk("hash" in without.body.data);
      t.notMatch(JSON.stringify(without.body), recoverable.key.slice(6), "nothing from which the key could be rebuilt");
      const decrypted = await h.call("keys.getKey", { keyId: recoverable.keyId, decrypt: true });
      t.equal(decrypted.body.data.plaintext, recoverable.key);
      const notRecoverable = await h.call("keys.getKey", { keyId: plain.keyId, decrypt: true });
      t.notOk("plaintext" in notRecoverable.body.data, "a key created without recoverable has no plaintext to give");
    });

    await t.test("whoami finds a key by its plaintext", async (t) => {
      const result = await h.call("keys.whoami", { key: plain.key });
      t.equal(result.status, 200);
      t.equal(result.body.data.keyId, plain.keyId);
      t.equal(result.body.data.name, "plain");
      assertError(t, await h.call("keys.whoami", { key: "not_a_key_we_made" }), "err:unkey:data:key_not_found");
    });

    await t.test("deleted keys, other workspaces' keys and keys of deleted APIs are 404", async (t) => {
      const gone = await createKey(h, apiId);
      await h.call("keys.deleteKey", { keyId: gone.keyId });
      assertError(t, await h.call("keys.getKey", { keyId: gone.keyId }), "err:unkey:data:key_not_found");
      assertError(t, await h.call("keys.whoami", { key: gone.key }), "err:unkey:data:key_not_found");
      const theirApi = (await h.call("apis.createApi", { name: "theirs" }, { rootKey: OTHER_ROOT_KEY })).body.data.apiId;
      const theirs = (await h.call("keys.createKey", { apiId: theirApi }, { rootKey: OTHER_ROOT_KEY })).body.data;
      assertError(t, await h.call("keys.getKey", { keyId: theirs.keyId }), "err:unkey:data:key_not_found");
      assertError(t, await h.call("keys.whoami", { key: theirs.key }), "err:unkey:data:key_not_found");
      const doomedApi = await createApi(h, "doomed");
      const orphan = await createKey(h, doomedApi);
      await h.call("apis.deleteApi", { apiId: doomedApi });
      assertError(t, await h.call("keys.getKey", { keyId: orphan.keyId }), "err:unkey:data:key_not_found");
      assertError(t, await h.call("keys.getKey", { keyId: "key_missing" }), "err:unkey:data:key_not_found");
    });

    await t.test("bad bodies are located 400s", async (t) => {
      assertInvalidAt(t, await h.call("keys.getKey", {}), "body.keyId", "is required");
      assertInvalidAt(t, await h.call("keys.getKey", { keyId: "k" }), "body.keyId", "must be at least 3 characters long");
      assertInvalidAt(t, await h.call("keys.getKey", { keyId: "key-1" }), "body.keyId", /^must contain only /);
      assertInvalidAt(t, await h.call("keys.getKey", { keyId: plain.keyId, decrypt: "true" }), "body.decrypt", "must be a boolean");
      assertInvalidAt(t, await h.call("keys.whoami", { key: "" }), "body.key", "must be at least 1 character long");
      assertInvalidAt(t, await h.call("keys.whoami", { key: "k".repeat(513) }), "body.key", "must be at most 512 characters long");
    });

    await checkUnauthenticated(t, h, "keys.getKey", { keyId: plain.keyId });
    await checkPermissions(t, h, "keys.getKey", () => ({ keyId: plain.keyId }), {
      missing: ["api.*.read_key", `api.${apiId}.read_key`],
      accepted: [["api.*.read_key"], [`api.${apiId}.read_key`]],
    });
    await checkPermissions(t, h, "keys.getKey", () => ({ keyId: recoverable.keyId, decrypt: true }), {
      missing: ["api.*.read_key"],
      accepted: [
        ["api.*.read_key", "api.*.decrypt_key"],
        [`api.${apiId}.read_key`, `api.${apiId}.decrypt_key`],
      ],
    });
    await t.test("decrypt without decrypt_key is a 403 naming it", async (t) => {
      const rootKey = await h.rootKey(["api.*.read_key"]);
      assertError(
        t,
        await h.call("keys.getKey", { keyId: recoverable.keyId, decrypt: true }, { rootKey }),
        "err:unkey:authorization:insufficient_permissions",
        /decrypt_key/,
      );
    });
    await checkUnauthenticated(t, h, "keys.whoami", { key: plain.key });
    await checkPermissions(t, h, "keys.whoami", () => ({ key: plain.key }), {
      missing: ["api.*.read_key"],
      accepted: [["api.*.read_key"], [`api.${apiId}.read_key`]],
    });
  });

  t.test(`apis.listKeys on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage, config: { vault: { key: TEST_VAULT_KEY } } });
    const apiId = await createApi(h);
    const otherApiId = await createApi(h, "other");
    await createKey(h, otherApiId);

    const total = 260;
    const made: string[] = [];
    for (let i = 0; i < total; i++) made.push((await createKey(h, apiId, i % 10 === 0 ? { externalId: "tenth" } : {})).keyId);

    for (const limit of [1, 7, 100]) {
      await t.test(`walking ${total} keys with limit ${limit} sees every key exactly once`, async (t) => {
        const seen: string[] = [];
        let cursor: string | undefined;
        let pages = 0;
        for (;;) {
          const page = await h.call("apis.listKeys", { apiId, limit, ...(cursor ? { cursor } : {}) });
          t.equal(page.status, 200);
          pages++;
          t.ok(page.body.data.length <= limit);
          seen.push(...page.body.data.map((key: any) => key.keyId));
          if (!page.body.pagination.hasMore) {
            t.notOk("cursor" in page.body.pagination, "the last page has no cursor");
            break;
          }
          cursor = page.body.pagination.cursor;
        }
        t.equal(seen.length, total);
        t.same(new Set(seen), new Set(made));
        t.equal(new Set(seen).size, seen.length, "no key twice");
        t.equal(pages, Math.ceil(total / limit));
      });
    }

    await t.test("the default page is 100 keys", async (t) => {
      const page = await h.call("apis.listKeys", { apiId });
      t.equal(page.body.data.length, 100);
      t.equal(page.body.pagination.hasMore, true);
    });

    await t.test("externalId filters to that identity's keys; an unknown one gives an empty list", async (t) => {
      const tenth = await h.call("apis.listKeys", { apiId, externalId: "tenth" });
      t.equal(tenth.body.data.length, total / 10);
      for (const key of tenth.body.data) t.equal(key.identity.externalId, "tenth");
      const none = await h.call("apis.listKeys", { apiId, externalId: "nobody" });
      t.same(none.body, { meta: none.body.meta, data: [], pagination: { hasMore: false } });
    });

    await t.test("deleted keys are not listed", async (t) => {
      const small = await createApi(h, "small");
      const keep = await createKey(h, small);
      const drop = await createKey(h, small);
      await h.call("keys.deleteKey", { keyId: drop.keyId });
      t.same(
        (await h.call("apis.listKeys", { apiId: small })).body.data.map((k: any) => k.keyId),
        [keep.keyId],
      );
    });

    await t.test("decrypt lists plaintexts of recoverable keys; nothing shows a hash", async (t) => {
      const small = await createApi(h, "recoverables");
      const key = await createKey(h, small, { recoverable: true });
      const listed = await h.call("apis.listKeys", { apiId: small, decrypt: true });
      t.equal(listed.body.data[0].plaintext, key.key);
      t.notMatch(JSON.stringify((await h.call("apis.listKeys", { apiId: small })).body), /hash|plaintext/);
    });

    await t.test("unknown, other-workspace and deleted APIs are 404", async (t) => {
      assertError(t, await h.call("apis.listKeys", { apiId: "api_missing1" }), "err:unkey:data:api_not_found");
      assertError(t, await h.call("apis.listKeys", { apiId }, { rootKey: OTHER_ROOT_KEY }), "err:unkey:data:api_not_found");
    });

    await t.test("bad bodies are located 400s", async (t) => {
      assertInvalidAt(t, await h.call("apis.listKeys", {}), "body.apiId", "is required");
      assertInvalidAt(t, await h.call("apis.listKeys", { apiId, limit: 0 }), "body.limit", "must be greater than or equal to 1");
      assertInvalidAt(t, await h.call("apis.listKeys", { apiId, limit: 101 }), "body.limit", "must be less than or equal to 100");
      assertInvalidAt(t, await h.call("apis.listKeys", { apiId, cursor: "" }), "body.cursor", "must be at least 1 character long");
      assertInvalidAt(t, await h.call("apis.listKeys", { apiId, externalId: "bad id" }), "body.externalId", /^must contain only /);
    });

    await t.test("an unknown cursor starts from the next id after it", async (t) => {
      const page = await h.call("apis.listKeys", { apiId, cursor: "zzzz" });
      t.same(page.body.data, []);
      t.equal(page.body.pagination.hasMore, false);
    });

    await checkUnauthenticated(t, h, "apis.listKeys", { apiId, limit: 1 });
    await checkPermissions(t, h, "apis.listKeys", () => ({ apiId, limit: 1 }), {
      missing: ["api.*.read_key", "api.*.read_api"],
      accepted: [["api.*.read_key", "api.*.read_api"], [`api.${apiId}.read_key`, `api.${apiId}.read_api`], ["api.*"]],
    });
    await t.test("read_key alone is not enough: the detail names read_api", async (t) => {
      const rootKey = await h.rootKey(["api.*.read_key"]);
      const result = await h.call("apis.listKeys", { apiId }, { rootKey });
      assertError(t, result, "err:unkey:authorization:insufficient_permissions");
      t.equal(result.body.error.detail, `Missing one of these permissions: 'api.*.read_api' or 'api.${apiId}.read_api'.`);
    });
  });
}
