import t from "tap";
import { hashKey } from "../../src/lib/hash.js";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { createApi, getKey, TEST_VAULT_KEY } from "../helpers/fixtures.js";
import { harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

const BASE58 = /^[1-9A-HJ-NP-Za-km-z]+$/;

for (const storage of STORAGE_KINDS) {
  t.test(`keys.createKey on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage, config: { vault: { key: TEST_VAULT_KEY } } });
    const apiId = await createApi(h);

    await t.test("with only apiId: a 16-byte Base58 key, enabled, unlimited, no extras", async (t) => {
      const created = await h.call("keys.createKey", { apiId });
      t.equal(created.status, 200);
      t.match(created.body.data.keyId, /^key_/);
      t.match(created.body.data.key, BASE58);
      t.ok(created.body.data.key.length >= 21 && created.body.data.key.length <= 22, "16 bytes are 21-22 Base58 characters");
      const key = await getKey(h, created.body.data.keyId);
      t.same(Object.keys(key).sort(), ["createdAt", "enabled", "keyId", "start"]);
      t.equal(key.enabled, true);
      t.equal(key.start, created.body.data.key.slice(0, 4));
    });

    await t.test("with every field, each is stored and shown", async (t) => {
      await h.call("permissions.createRole", { name: "support" });
      const created = await h.call("keys.createKey", {
        apiId,
        prefix: "sk_live",
        name: "Acme production",
        byteLength: 32,
        externalId: "acme.corp-1",
        meta: { plan: "enterprise", seats: 40, tags: ["a", "b"], nested: { on: true } },
        roles: ["support"],
        permissions: ["documents.read", "documents.*"],
        expires: 4_102_444_800_000,
        credits: { remaining: 500, refill: { interval: "monthly", amount: 500, refillDay: 15 } },
        ratelimits: [
          { name: "requests", limit: 100, duration: 60_000, autoApply: true },
          { name: "tokens", limit: 10_000, duration: 3_600_000 },
        ],
        enabled: false,
        recoverable: true,
      });
      t.equal(created.status, 200, JSON.stringify(created.body.error ?? ""));
      const { keyId, key } = created.body.data;
      t.match(key, /^sk_live_[1-9A-HJ-NP-Za-km-z]{43,44}$/, "prefix_ then 32 bytes of Base58");
      const shown = await getKey(h, keyId, true);
      t.equal(shown.name, "Acme production");
      t.equal(shown.start, key.slice(0, "sk_live_".length + 4));
      t.same(shown.meta, { plan: "enterprise", seats: 40, tags: ["a", "b"], nested: { on: true } });
      t.same(shown.roles, ["support"]);
      t.same(shown.permissions, ["documents.read", "documents.*"]);
      t.equal(shown.expires, 4_102_444_800_000);
      t.same(shown.credits, { remaining: 500, refill: { interval: "monthly", amount: 500, refillDay: 15 } });
      t.equal(shown.enabled, false);
      t.equal(shown.plaintext, key, "recoverable: the plaintext comes back with decrypt");
      t.equal(shown.identity.externalId, "acme.corp-1");
      t.match(shown.identity.id, /^id_/);
      t.same(
        shown.ratelimits.map((r: any) => [r.name, r.limit, r.duration, r.autoApply]),
        [
          ["requests", 100, 60_000, true],
          ["tokens", 10_000, 3_600_000, false],
        ],
      );
      for (const limit of shown.ratelimits) t.match(limit.id, /^rl_/);
    });

    await t.test("the key is stored only as its hash", async (t) => {
      const { keyId, key } = (await h.call("keys.createKey", { apiId })).body.data;
      const record = await h.app.stores.keys.get("ws_test", keyId);
      t.equal(record?.hash, hashKey(key));
      t.notMatch(JSON.stringify(record), key);
    });

    await t.test("unknown permissions are created; an externalId reuses its identity", async (t) => {
      await h.call("keys.createKey", { apiId, permissions: ["brand.new.permission"], externalId: "shared_owner" });
      const permission = await h.call("permissions.getPermission", { permission: "brand.new.permission" });
      t.equal(permission.status, 200);
      t.same(
        { name: permission.body.data.name, slug: permission.body.data.slug },
        { name: "brand.new.permission", slug: "brand.new.permission" },
      );
      const second = await h.call("keys.createKey", { apiId, externalId: "shared_owner" });
      const identities = await h.call("identities.getIdentity", { identity: "shared_owner" });
      t.equal((await getKey(h, second.body.data.keyId)).identity.id, identities.body.data.id);
    });

    await t.test("a daily refill ignores refillDay, as in Unkey", async (t) => {
      const created = await h.call("keys.createKey", {
        apiId,
        credits: { remaining: 5, refill: { interval: "daily", amount: 5, refillDay: 3 } },
      });
      t.same((await getKey(h, created.body.data.keyId)).credits, { remaining: 5, refill: { interval: "daily", amount: 5 } });
    });

    await t.test("credits with remaining null and no refill mean unlimited", async (t) => {
      const created = await h.call("keys.createKey", { apiId, credits: { remaining: null } });
      t.equal((await getKey(h, created.body.data.keyId)).credits, undefined);
    });

    await t.test("each constraint of the body is a located 400", async (t) => {
      const cases: [Record<string, unknown>, string, string | RegExp][] = [
        [{}, "body.apiId", "is required"],
        [{ apiId: "ab" }, "body.apiId", "must be at least 3 characters long"],
        [{ apiId: "api-1" }, "body.apiId", /^must contain only /],
        [{ apiId, prefix: "" }, "body.prefix", "must be at least 1 character long"],
        [{ apiId, prefix: "a".repeat(17) }, "body.prefix", "must be at most 16 characters long"],
        [{ apiId, prefix: "sk-live" }, "body.prefix", /^must contain only /],
        [{ apiId, name: "" }, "body.name", "must be at least 1 character long"],
        [{ apiId, name: "n".repeat(256) }, "body.name", "must be at most 255 characters long"],
        [{ apiId, byteLength: 15 }, "body.byteLength", "must be greater than or equal to 16"],
        [{ apiId, byteLength: 256 }, "body.byteLength", "must be less than or equal to 255"],
        [{ apiId, byteLength: 16.5 }, "body.byteLength", "must be an integer"],
        [{ apiId, byteLength: "16" }, "body.byteLength", "must be an integer"],
        [{ apiId, externalId: "" }, "body.externalId", "must be at least 1 character long"],
        [{ apiId, externalId: "has space" }, "body.externalId", /^must contain only /],
        [{ apiId, meta: "text" }, "body.meta", "must be an object"],
        [
          { apiId, meta: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, i])) },
          "body.meta",
          "must have at most 100 properties",
        ],
        [{ apiId, meta: { big: "x".repeat(70 * 1024) } }, "body.meta", /must be at most 65536 bytes/],
        [{ apiId, roles: ["bad role"] }, "body.roles[0]", /^must contain only /],
        [{ apiId, roles: Array.from({ length: 101 }, (_, i) => `r${i}`) }, "body.roles", "must contain at most 100 items"],
        [{ apiId, roles: ["r".repeat(101)] }, "body.roles[0]", "must be at most 100 characters long"],
        [{ apiId, permissions: [""] }, "body.permissions[0]", "must be at least 1 character long"],
        [{ apiId, permissions: ["p".repeat(101)] }, "body.permissions[0]", "must be at most 100 characters long"],
        [{ apiId, permissions: ["has space"] }, "body.permissions[0]", /^must contain only /],
        [{ apiId, permissions: Array.from({ length: 1001 }, (_, i) => `p${i}`) }, "body.permissions", "must contain at most 1000 items"],
        [{ apiId, expires: -1 }, "body.expires", "must be greater than or equal to 0"],
        [{ apiId, expires: 4_102_444_800_001 }, "body.expires", "must be less than or equal to 4102444800000"],
        [{ apiId, credits: null }, "body.credits", "must be an object"],
        [{ apiId, credits: {} }, "body.credits.remaining", "is required"],
        [{ apiId, credits: { remaining: -1 } }, "body.credits.remaining", "must be greater than or equal to 0"],
        [
          { apiId, credits: { remaining: null, refill: { interval: "daily", amount: 1 } } },
          "body.credits.remaining",
          "must be provided when credits.refill is set",
        ],
        [
          { apiId, credits: { remaining: 1, refill: { interval: "weekly", amount: 1 } } },
          "body.credits.refill.interval",
          'must be one of: "daily", "monthly"',
        ],
        [
          { apiId, credits: { remaining: 1, refill: { interval: "daily", amount: 0 } } },
          "body.credits.refill.amount",
          "must be greater than or equal to 1",
        ],
        [
          { apiId, credits: { remaining: 1, refill: { interval: "monthly", amount: 1 } } },
          "body.credits.refill.refillDay",
          "is required when the interval is 'monthly'",
        ],
        [
          { apiId, credits: { remaining: 1, refill: { interval: "monthly", amount: 1, refillDay: 32 } } },
          "body.credits.refill.refillDay",
          "must be less than or equal to 31",
        ],
        [
          { apiId, credits: { remaining: 1, refill: { interval: "monthly", amount: 1, refillDay: 0 } } },
          "body.credits.refill.refillDay",
          "must be greater than or equal to 1",
        ],
        [
          { apiId, ratelimits: [{ name: "ab", limit: 1, duration: 1000 }] },
          "body.ratelimits[0].name",
          "must be at least 3 characters long",
        ],
        [
          { apiId, ratelimits: [{ name: "abc", limit: 0, duration: 1000 }] },
          "body.ratelimits[0].limit",
          "must be greater than or equal to 1",
        ],
        [
          { apiId, ratelimits: [{ name: "abc", limit: 1, duration: 999 }] },
          "body.ratelimits[0].duration",
          "must be greater than or equal to 1000",
        ],
        [{ apiId, ratelimits: [{ name: "abc", limit: 1 }] }, "body.ratelimits[0].duration", "is required"],
        [{ apiId, ratelimits: [{ name: "abc", limit: 1, duration: 1000, cost: 1 }] }, "body.ratelimits[0].cost", "is not a known field"],
        [
          {
            apiId,
            ratelimits: [
              { name: "same", limit: 1, duration: 1000 },
              { name: "same", limit: 2, duration: 1000 },
            ],
          },
          "body.ratelimits[1].name",
          "repeats the name of ratelimits[0]",
        ],
        [
          { apiId, ratelimits: Array.from({ length: 51 }, (_, i) => ({ name: `limit${i}`, limit: 1, duration: 1000 })) },
          "body.ratelimits",
          "must contain at most 50 items",
        ],
        [{ apiId, enabled: "yes" }, "body.enabled", "must be a boolean"],
        [{ apiId, recoverable: 1 }, "body.recoverable", "must be a boolean"],
        [{ apiId, async: true }, "body.async", "is not a known field"],
      ];
      for (const [body, location, message] of cases) assertInvalidAt(t, await h.call("keys.createKey", body), location, message);
    });

    await t.test("roles must exist: an unknown role is a 404 naming it, and no key is made", async (t) => {
      const before = (await h.call("apis.listKeys", { apiId })).body.data.length;
      assertError(t, await h.call("keys.createKey", { apiId, roles: ["no_such_role"] }), "err:unkey:data:role_not_found", /no_such_role/);
      t.equal((await h.call("apis.listKeys", { apiId })).body.data.length, before);
    });

    await t.test("an unknown API, another workspace's API and a deleted API are 404", async (t) => {
      assertError(t, await h.call("keys.createKey", { apiId: "api_missing123" }), "err:unkey:data:api_not_found");
      const theirs = (await h.call("apis.createApi", { name: "theirs" }, { rootKey: OTHER_ROOT_KEY })).body.data.apiId;
      assertError(t, await h.call("keys.createKey", { apiId: theirs }), "err:unkey:data:api_not_found");
      const doomed = await createApi(h, "doomed");
      await h.call("apis.deleteApi", { apiId: doomed });
      assertError(t, await h.call("keys.createKey", { apiId: doomed }), "err:unkey:data:api_not_found");
    });

    await checkUnauthenticated(t, h, "keys.createKey", { apiId });
    await checkPermissions(t, h, "keys.createKey", () => ({ apiId }), {
      missing: ["api.*.create_key", `api.${apiId}.create_key`],
      accepted: [["api.*.create_key"], [`api.${apiId}.create_key`], ["apis.*.create_key"]],
    });
    await checkPermissions(t, h, "keys.createKey", () => ({ apiId, recoverable: true }), {
      missing: ["api.*.create_key"],
      accepted: [
        ["api.*.create_key", "api.*.encrypt_key"],
        [`api.${apiId}.create_key`, `api.${apiId}.encrypt_key`],
      ],
    });

    await t.test("a recoverable key also needs encrypt_key, and the detail names it", async (t) => {
      const rootKey = await h.rootKey(["api.*.create_key"]);
      const result = await h.call("keys.createKey", { apiId, recoverable: true }, { rootKey });
      assertError(t, result, "err:unkey:authorization:insufficient_permissions", /encrypt_key/);
    });
  });

  t.test(`keys.createKey without a vault key on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage });
    const apiId = await createApi(h);
    await t.test("a recoverable key is a 412 that says what is missing", async (t) => {
      assertError(
        t,
        await h.call("keys.createKey", { apiId, recoverable: true }),
        "err:unkey:application:precondition_failed",
        /vault key/,
      );
    });
    await t.test("other keys are made as usual", async (t) => {
      t.equal((await h.call("keys.createKey", { apiId })).status, 200);
    });
  });
}
