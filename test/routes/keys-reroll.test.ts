import t from "tap";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { ManualClock } from "../helpers/clock.js";
import { createApi, createKey, getKey, TEST_VAULT_KEY } from "../helpers/fixtures.js";
import { harness, STORAGE_KINDS } from "../helpers/harness.js";

// keys.rerollKey: a new key with the old one's settings; the old one expires on a whole minute.

for (const storage of STORAGE_KINDS) {
  t.test(`keys.rerollKey on ${storage} stores`, async (t) => {
    const clock = new ManualClock(Date.UTC(2026, 4, 1, 12, 0, 30));
    const h = await harness(t, { storage, clock, config: { vault: { key: TEST_VAULT_KEY } } });
    const apiId = await createApi(h);
    await h.call("permissions.createRole", { name: "ops" });

    await t.test("the new key copies the old key's settings and the old one expires on a whole minute", async (t) => {
      const old = await createKey(h, apiId, {
        prefix: "live",
        byteLength: 24,
        name: "rolling",
        externalId: "roller",
        meta: { m: 1 },
        roles: ["ops"],
        permissions: ["p.one"],
        credits: { remaining: 9, refill: { interval: "daily", amount: 9 } },
        ratelimits: [{ name: "requests", limit: 3, duration: 1000, autoApply: true }],
        recoverable: true,
        enabled: false,
      });
      const result = await h.call("keys.rerollKey", { keyId: old.keyId, expiration: 90_000 });
      t.equal(result.status, 200);
      const { keyId, key } = result.body.data;
      t.not(keyId, old.keyId);
      t.match(key, /^live_[1-9A-HJ-NP-Za-km-z]{32,33}$/, "same prefix and byte length");
      const before = await getKey(h, old.keyId);
      const after = await getKey(h, keyId, true);
      t.equal(after.plaintext, key, "still recoverable");
      for (const field of ["name", "meta", "roles", "permissions", "credits", "enabled"]) t.same(after[field], before[field], field);
      t.equal(after.identity.id, before.identity.id);
      t.same(
        after.ratelimits.map((r: any) => [r.name, r.limit, r.duration, r.autoApply]),
        [["requests", 3, 1000, true]],
      );
      t.not(after.ratelimits[0].id, before.ratelimits[0].id, "the copy has its own limit id");
      t.equal(before.expires, Date.UTC(2026, 4, 1, 12, 2, 0), "12:00:30 + 90 s = 12:02:00, a whole minute");
    });

    await t.test("expiration 0 ends the old key now, and never extends an earlier expiry", async (t) => {
      const now = await createKey(h, apiId);
      await h.call("keys.rerollKey", { keyId: now.keyId, expiration: 0 });
      t.equal((await getKey(h, now.keyId)).expires, clock.now());
      const soon = await createKey(h, apiId, { expires: clock.now() + 5_000 });
      await h.call("keys.rerollKey", { keyId: soon.keyId, expiration: 3_600_000 });
      t.equal((await getKey(h, soon.keyId)).expires, clock.now() + 5_000);
    });

    await t.test("unknown keys are 404; bad bodies are 400", async (t) => {
      assertError(t, await h.call("keys.rerollKey", { keyId: "key_missing", expiration: 0 }), "err:unkey:data:key_not_found");
      assertInvalidAt(t, await h.call("keys.rerollKey", { keyId: "key_missing" }), "body.expiration", "is required");
      assertInvalidAt(
        t,
        await h.call("keys.rerollKey", { keyId: "key_missing", expiration: -1 }),
        "body.expiration",
        "must be greater than or equal to 0",
      );
    });

    const plain = await createKey(h, apiId);
    await checkUnauthenticated(t, h, "keys.rerollKey", { keyId: plain.keyId, expiration: 0 });
    await checkPermissions(t, h, "keys.rerollKey", async () => ({ keyId: (await createKey(h, apiId)).keyId, expiration: 0 }), {
      missing: ["api.*.create_key"],
      accepted: [["api.*.create_key"], [`api.${apiId}.create_key`]],
    });
    await t.test("rerolling a recoverable key also needs encrypt_key", async (t) => {
      const recoverable = await createKey(h, apiId, { recoverable: true });
      const rootKey = await h.rootKey(["api.*.create_key"]);
      assertError(
        t,
        await h.call("keys.rerollKey", { keyId: recoverable.keyId, expiration: 0 }, { rootKey }),
        "err:unkey:authorization:insufficient_permissions",
        /encrypt_key/,
      );
    });
  });
}
