import { createHash, randomBytes } from "node:crypto";
import t from "tap";
import { base58Encode } from "../../src/lib/base58.js";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { createApi, getKey } from "../helpers/fixtures.js";
import { harness, OTHER_ROOT_KEY, OTHER_WORKSPACE, STORAGE_KINDS, WORKSPACE } from "../helpers/harness.js";

/** The migrations of these tests, as an operator declares them. */
const TEST_MIGRATIONS = [
  { id: "legacy_hex", workspaceId: WORKSPACE, scheme: "sha256-hex" },
  { id: "legacy_b64", workspaceId: WORKSPACE, scheme: "sha256-base64" },
  { id: "seam", workspaceId: WORKSPACE, scheme: "prefixed-api-key" },
  { id: "elsewhere", workspaceId: OTHER_WORKSPACE, scheme: "prefixed-api-key" },
];

const sha256 = (text: string, encoding: "hex" | "base64") => createHash("sha256").update(text).digest(encoding);

/** A token as seamapi's prefixed-api-key makes them, and the hash such a system stores: that of the long token. */
function prefixedToken(prefix: string): { token: string; storedHash: string } {
  const shortToken = base58Encode(randomBytes(6));
  const longToken = base58Encode(randomBytes(18));
  return { token: `${prefix}_${shortToken}_${longToken}`, storedHash: sha256(longToken, "hex") };
}

for (const storage of STORAGE_KINDS) {
  t.test(`keys.migrateKeys and verifyKey's migrationId on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage, config: { migrations: TEST_MIGRATIONS } });
    const apiId = await createApi(h);
    const verify = async (key: string, extra: Record<string, unknown> = {}, rootKey?: string) => {
      const result = await h.call("keys.verifyKey", { key, ...extra }, rootKey === undefined ? {} : { rootKey });
      t.equal(result.status, 200, JSON.stringify(result.body.error ?? ""));
      return result.body.data;
    };

    await t.test("sha256-hex and sha256-base64 keys verify at once, without a migration id", async (t) => {
      const hexKey = `legacy_${randomBytes(12).toString("hex")}`;
      const base64Key = `legacy_${randomBytes(12).toString("hex")}`;
      const hexHash = sha256(hexKey, "hex").toUpperCase();
      const imported = await h.call("keys.migrateKeys", {
        migrationId: "legacy_hex",
        apiId,
        keys: [{ hash: hexHash, name: "from hex", meta: { plan: "pro" }, externalId: "user_1", permissions: ["docs.read"] }],
      });
      t.equal(imported.status, 200, JSON.stringify(imported.body.error ?? ""));
      t.same(imported.body.data.failed, []);
      t.equal(imported.body.data.migrated.length, 1);
      t.equal(imported.body.data.migrated[0].hash, hexHash, "the hash as it was given");
      const keyId = imported.body.data.migrated[0].keyId;
      t.match(keyId, /^key_/);

      const verified = await verify(hexKey);
      t.equal(verified.code, "VALID");
      t.equal(verified.keyId, keyId);
      t.equal(verified.name, "from hex");
      t.same(verified.meta, { plan: "pro" });
      t.same(verified.permissions, ["docs.read"]);
      t.equal(verified.identity.externalId, "user_1");

      const base64 = await h.call("keys.migrateKeys", {
        migrationId: "legacy_b64",
        apiId,
        keys: [{ hash: sha256(base64Key, "base64"), credits: { remaining: 2 } }],
      });
      t.equal(base64.status, 200);
      t.equal((await verify(base64Key)).credits, 1, "credits imported and spent");
      t.equal((await verify(base64Key, { migrationId: "legacy_b64" })).credits, 0, "a migration id changes nothing for it");
      t.equal((await verify(base64Key)).code, "USAGE_EXCEEDED");
      const shown = await getKey(h, base64.body.data.migrated[0].keyId);
      t.equal(shown.start, "", "the start of an imported key is unknown");
    });

    await t.test("a prefixed-api-key token: pending until verified with its migration, then keygate's own", async (t) => {
      const { token, storedHash } = prefixedToken("my_co");
      const imported = await h.call("keys.migrateKeys", {
        migrationId: "seam",
        apiId,
        keys: [{ hash: storedHash, name: "seam key", ratelimits: [{ name: "requests", limit: 10, duration: 60_000, autoApply: true }] }],
      });
      t.equal(imported.status, 200, JSON.stringify(imported.body.error ?? ""));
      const keyId = imported.body.data.migrated[0].keyId;

      t.equal((await verify(token)).code, "NOT_FOUND", "without the migration id a pending key is not found");
      t.equal((await verify(token, { migrationId: "legacy_hex" })).code, "NOT_FOUND", "another migration does not find it");
      t.equal((await verify(token, { migrationId: "no_such_migration" })).code, "NOT_FOUND", "nor does an unknown one");
      t.equal((await verify(token, { migrationId: "elsewhere" }, OTHER_ROOT_KEY)).code, "NOT_FOUND", "nor another workspace");
      t.equal((await verify(`${token}x`, { migrationId: "seam" })).code, "NOT_FOUND", "a wrong token is not found");
      t.equal((await verify("no-underscores", { migrationId: "seam" })).code, "NOT_FOUND", "a token of another shape");
      t.equal((await getKey(h, keyId)).start, "", "still pending");

      const first = await verify(token, { migrationId: "seam" });
      t.equal(first.code, "VALID");
      t.equal(first.keyId, keyId);
      t.equal(first.name, "seam key");
      t.equal(first.ratelimits[0].remaining, 9, "the imported limit applies");

      const second = await verify(token);
      t.equal(second.code, "VALID", "afterwards it verifies without the migration id");
      t.equal(second.keyId, keyId);
      t.equal((await verify(token, { migrationId: "seam" })).keyId, keyId, "and still with it");
      const shown = await getKey(h, keyId);
      t.equal(shown.start, token.slice(0, "my_co_".length + 4), "start: the prefix and 4 characters, as for keys keygate issues");
      const whoami = await h.call("keys.whoami", { key: token });
      t.equal(whoami.body.data.keyId, keyId, "the key is stored under keygate's hash of the whole token now");

      const again = await h.call("keys.migrateKeys", { migrationId: "seam", apiId, keys: [{ hash: storedHash }] });
      t.equal(again.status, 200);
      t.equal(again.body.data.migrated.length, 1, "the old hash no longer names the key");
      t.equal((await verify(token, { migrationId: "seam" })).keyId, keyId, "the migrated key wins: its own hash is found first");
    });

    await t.test("a hash a key already holds fails and is never overwritten; the others are migrated", async (t) => {
      const one = prefixedToken("dup");
      const two = prefixedToken("dup");
      const first = await h.call("keys.migrateKeys", { migrationId: "seam", apiId, keys: [{ hash: one.storedHash, name: "first" }] });
      const firstId = first.body.data.migrated[0].keyId;
      const mixed = await h.call("keys.migrateKeys", {
        migrationId: "seam",
        apiId,
        keys: [
          { hash: one.storedHash, name: "overwrite?" },
          { hash: two.storedHash, name: "second" },
          { hash: two.storedHash, name: "second twice" },
        ],
      });
      t.equal(mixed.status, 200, "partial success is a 200");
      t.same(mixed.body.data.failed, [one.storedHash, two.storedHash]);
      t.equal(mixed.body.data.migrated.length, 1);
      t.equal(mixed.body.data.migrated[0].hash, two.storedHash);
      t.equal((await verify(one.token, { migrationId: "seam" })).name, "first", "the existing key is unchanged");
      t.equal((await getKey(h, firstId)).name, "first");
      t.equal((await verify(two.token, { migrationId: "seam" })).name, "second");

      const created = await h.call("keys.createKey", { apiId });
      const nativeClash = await h.call("keys.migrateKeys", {
        migrationId: "legacy_hex",
        apiId,
        keys: [{ hash: sha256(created.body.data.key, "hex") }],
      });
      t.same(nativeClash.body.data, { migrated: [], failed: [sha256(created.body.data.key, "hex")] }, "a key keygate issued");
    });

    await t.test("the key's own settings still decide: a disabled import is DISABLED once found", async (t) => {
      const { token, storedHash } = prefixedToken("off");
      await h.call("keys.migrateKeys", { migrationId: "seam", apiId, keys: [{ hash: storedHash, enabled: false }] });
      t.equal((await verify(token, { migrationId: "seam" })).code, "DISABLED");
      t.equal((await verify(token)).code, "DISABLED", "found by keygate's hash afterwards");
    });

    await t.test("a root key that may not verify the key's API neither finds nor rewrites it", async (t) => {
      const otherApi = await createApi(h, "other-api");
      const narrow = await h.rootKey([`api.${otherApi}.verify_key`]);
      const { token, storedHash } = prefixedToken("narrow");
      const imported = await h.call("keys.migrateKeys", { migrationId: "seam", apiId, keys: [{ hash: storedHash }] });
      t.equal((await verify(token, { migrationId: "seam" }, narrow)).code, "NOT_FOUND");
      t.equal((await getKey(h, imported.body.data.migrated[0].keyId)).start, "", "still pending");
      t.equal((await verify(token, { migrationId: "seam" })).code, "VALID");
    });

    await t.test("refusals: unknown migration or API, another workspace's, a hash of another scheme, bad fields", async (t) => {
      const hash = sha256("whatever", "hex");
      assertError(
        t,
        await h.call("keys.migrateKeys", { migrationId: "nope", apiId, keys: [{ hash }] }),
        "err:unkey:data:migration_not_found",
      );
      assertError(
        t,
        await h.call("keys.migrateKeys", { migrationId: "elsewhere", apiId, keys: [{ hash }] }),
        "err:unkey:data:migration_not_found",
        /workspace/,
      );
      assertError(
        t,
        await h.call("keys.migrateKeys", { migrationId: "seam", apiId: "api_missing123", keys: [{ hash }] }),
        "err:unkey:data:api_not_found",
      );
      assertError(
        t,
        await h.call("keys.migrateKeys", { migrationId: "elsewhere", apiId, keys: [{ hash }] }, { rootKey: OTHER_ROOT_KEY }),
        "err:unkey:data:api_not_found",
        /./,
      );
      const shapes = await h.call("keys.migrateKeys", {
        migrationId: "legacy_hex",
        apiId,
        keys: [{ hash: sha256("valid", "hex") }, { hash: sha256("base64 is not hex", "base64") }],
      });
      assertInvalidAt(t, shapes, "body.keys[1].hash", /hex/);
      t.equal((await verify("valid")).code, "NOT_FOUND", "a refused request imports none of its keys");
      assertInvalidAt(
        t,
        await h.call("keys.migrateKeys", { migrationId: "legacy_b64", apiId, keys: [{ hash: sha256("x", "hex") }] }),
        "body.keys[0].hash",
        /base64/,
      );
      assertInvalidAt(
        t,
        await h.call("keys.migrateKeys", {
          migrationId: "legacy_hex",
          apiId,
          keys: [{ hash }, { hash, credits: { refill: { interval: "daily", amount: 5 } } }],
        }),
        "body.keys[1].credits.remaining",
      );
      assertInvalidAt(t, await h.call("keys.migrateKeys", { migrationId: "legacy_hex", apiId, keys: [] }), "body.keys");
      assertInvalidAt(
        t,
        await h.call("keys.migrateKeys", { migrationId: "legacy_hex", apiId, keys: [{ hash, key: "x" }] }),
        "body.keys[0].key",
      );
      assertError(
        t,
        await h.call("keys.migrateKeys", { migrationId: "legacy_hex", apiId, keys: [{ hash, roles: ["no_such_role"] }] }),
        "err:unkey:data:role_not_found",
      );
    });

    await checkUnauthenticated(t, h, "keys.migrateKeys", { migrationId: "seam", apiId, keys: [{ hash: prefixedToken("a").storedHash }] });
    await checkPermissions(
      t,
      h,
      "keys.migrateKeys",
      () => ({ migrationId: "seam", apiId, keys: [{ hash: prefixedToken("p").storedHash }] }),
      {
        missing: ["api.*.create_key", `api.${apiId}.create_key`],
        accepted: [["api.*.create_key"], [`api.${apiId}.create_key`]],
      },
    );
  });
}
