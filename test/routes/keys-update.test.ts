import t from "tap";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { ManualClock } from "../helpers/clock.js";
import { createApi, createKey, getKey, TEST_VAULT_KEY } from "../helpers/fixtures.js";
import { harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

for (const storage of STORAGE_KINDS) {
  t.test(`keys.updateKey on ${storage} stores`, async (t) => {
    const clock = new ManualClock(Date.UTC(2026, 2, 10, 12));
    const h = await harness(t, { storage, clock });
    const apiId = await createApi(h);
    await h.call("permissions.createRole", { name: "reader" });
    await h.call("permissions.createRole", { name: "writer" });
    const full = {
      name: "original",
      externalId: "owner_a",
      meta: { a: 1 },
      expires: Date.UTC(2030, 0, 1),
      credits: { remaining: 10, refill: { interval: "monthly", amount: 10, refillDay: 1 } },
      ratelimits: [
        { name: "requests", limit: 5, duration: 1000 },
        { name: "bursts", limit: 50, duration: 60_000 },
      ],
      roles: ["reader"],
      permissions: ["a.read"],
    };

    await t.test("omitted fields stay as they are", async (t) => {
      const { keyId } = await createKey(h, apiId, full);
      const before = await getKey(h, keyId);
      clock.advance(1_000);
      const result = await h.call("keys.updateKey", { keyId });
      t.equal(result.status, 200);
      t.same(result.body.data, {});
      const after = await getKey(h, keyId);
      t.same({ ...after, updatedAt: undefined }, { ...before, updatedAt: undefined });
      t.equal(after.updatedAt, clock.now(), "updatedAt records the change");
    });

    await t.test("null clears name, externalId, meta, expires and credits", async (t) => {
      const { keyId } = await createKey(h, apiId, full);
      await h.call("keys.updateKey", { keyId, name: null, externalId: null, meta: null, expires: null, credits: null });
      const after = await getKey(h, keyId);
      for (const field of ["name", "identity", "meta", "expires", "credits"]) t.notOk(field in after, `${field} cleared`);
      t.same(after.roles, ["reader"], "untouched fields stay");
    });

    await t.test("values set each field; lists are replaced, not merged", async (t) => {
      const { keyId } = await createKey(h, apiId, full);
      const before = await getKey(h, keyId);
      await h.call("keys.updateKey", {
        keyId,
        name: "renamed",
        externalId: "owner_b",
        meta: { b: 2 },
        expires: Date.UTC(2031, 0, 1),
        enabled: false,
        roles: ["writer"],
        permissions: ["b.write", "c.*"],
        ratelimits: [
          { name: "requests", limit: 7, duration: 2000, autoApply: true },
          { name: "daily", limit: 1000, duration: 86_400_000 },
        ],
      });
      const after = await getKey(h, keyId);
      t.equal(after.name, "renamed");
      t.equal(after.identity.externalId, "owner_b");
      t.same(after.meta, { b: 2 }, "meta is replaced, not merged");
      t.equal(after.expires, Date.UTC(2031, 0, 1));
      t.equal(after.enabled, false);
      t.same(after.roles, ["writer"]);
      t.same(after.permissions, ["b.write", "c.*"]);
      const requestsBefore = before.ratelimits.find((r: any) => r.name === "requests");
      const requestsAfter = after.ratelimits.find((r: any) => r.name === "requests");
      t.equal(requestsAfter.id, requestsBefore.id, "a limit replaced by name keeps its id");
      t.same([requestsAfter.limit, requestsAfter.duration, requestsAfter.autoApply], [7, 2000, true]);
      t.notOk(
        after.ratelimits.some((r: any) => r.name === "bursts"),
        "names not listed are removed",
      );
      t.ok(after.ratelimits.some((r: any) => r.name === "daily"));
    });

    await t.test("credits: refill null clears only the refill; remaining null clears everything", async (t) => {
      const { keyId } = await createKey(h, apiId, full);
      await h.call("keys.updateKey", { keyId, credits: { refill: null } });
      t.same((await getKey(h, keyId)).credits, { remaining: 10 });
      await h.call("keys.updateKey", { keyId, credits: { refill: { interval: "daily", amount: 3 } } });
      t.same((await getKey(h, keyId)).credits, { remaining: 10, refill: { interval: "daily", amount: 3 } }, "a refill can be added back");
      await h.call("keys.updateKey", { keyId, credits: { remaining: 4 } });
      t.same(
        (await getKey(h, keyId)).credits,
        { remaining: 4, refill: { interval: "daily", amount: 3 } },
        "remaining alone keeps the refill",
      );
      await h.call("keys.updateKey", { keyId, credits: { remaining: null } });
      t.notOk("credits" in (await getKey(h, keyId)));
    });

    await t.test("credits rules that span fields are located 400s", async (t) => {
      const { keyId } = await createKey(h, apiId);
      assertInvalidAt(
        t,
        await h.call("keys.updateKey", { keyId, credits: { refill: { interval: "daily", amount: 1 } } }),
        "body.credits.remaining",
        /must be provided/,
      );
      assertInvalidAt(
        t,
        await h.call("keys.updateKey", { keyId, credits: { remaining: 5, refill: { interval: "monthly", amount: 1 } } }),
        "body.credits.refill.refillDay",
        /is required/,
      );
      assertInvalidAt(
        t,
        await h.call("keys.updateKey", { keyId, credits: { remaining: 5, refill: { interval: "daily", amount: 1, refillDay: 2 } } }),
        "body.credits.refill.refillDay",
        /must not be given/,
      );
      t.notOk("credits" in (await getKey(h, keyId)), "nothing was written");
    });

    await t.test("unknown roles are 404 and change nothing; unknown permissions are created", async (t) => {
      const { keyId } = await createKey(h, apiId, full);
      assertError(t, await h.call("keys.updateKey", { keyId, name: "x", roles: ["ghost"] }), "err:unkey:data:role_not_found", /ghost/);
      t.equal((await getKey(h, keyId)).name, "original");
      await h.call("keys.updateKey", { keyId, permissions: ["invented.here"] });
      t.equal((await h.call("permissions.getPermission", { permission: "invented.here" })).status, 200);
    });

    await t.test("bad bodies are located 400s", async (t) => {
      const { keyId } = await createKey(h, apiId);
      const cases: [Record<string, unknown>, string, string | RegExp][] = [
        [{}, "body.keyId", "is required"],
        [{ keyId, name: "" }, "body.name", "must be at least 1 character long"],
        [{ keyId, name: 5 }, "body.name", "must be a string or null"],
        [{ keyId, externalId: "a b" }, "body.externalId", /^must contain only /],
        [{ keyId, meta: [] }, "body.meta", "must be an object or null"],
        [{ keyId, expires: -5 }, "body.expires", "must be greater than or equal to 0"],
        [{ keyId, credits: 5 }, "body.credits", "must be an object or null"],
        [{ keyId, credits: { remaining: -1 } }, "body.credits.remaining", "must be greater than or equal to 0"],
        [{ keyId, credits: { spent: 1 } }, "body.credits.spent", "is not a known field"],
        [{ keyId, enabled: null }, "body.enabled", "must be a boolean"],
        [{ keyId, roles: null }, "body.roles", "must be an array"],
        [
          {
            keyId,
            ratelimits: [
              { name: "dup", limit: 1, duration: 1000 },
              { name: "dup", limit: 1, duration: 1000 },
            ],
          },
          "body.ratelimits[1].name",
          /repeats/,
        ],
        [{ keyId, apiId }, "body.apiId", "is not a known field"],
      ];
      for (const [body, location, message] of cases) assertInvalidAt(t, await h.call("keys.updateKey", body), location, message);
    });

    await t.test("unknown, deleted and other workspaces' keys are 404", async (t) => {
      assertError(t, await h.call("keys.updateKey", { keyId: "key_missing" }), "err:unkey:data:key_not_found");
      const { keyId } = await createKey(h, apiId);
      assertError(t, await h.call("keys.updateKey", { keyId, name: "x" }, { rootKey: OTHER_ROOT_KEY }), "err:unkey:data:key_not_found");
      await h.call("keys.deleteKey", { keyId });
      assertError(t, await h.call("keys.updateKey", { keyId, name: "x" }), "err:unkey:data:key_not_found");
    });

    const target = await createKey(h, apiId);
    await checkUnauthenticated(t, h, "keys.updateKey", { keyId: target.keyId });
    await checkPermissions(t, h, "keys.updateKey", () => ({ keyId: target.keyId, name: "n" }), {
      missing: ["api.*.update_key", `api.${apiId}.update_key`],
      accepted: [["api.*.update_key"], [`api.${apiId}.update_key`]],
    });
  });

  t.test(`keys.updateCredits on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage });
    const apiId = await createApi(h);

    await t.test("set, increment and decrement (floored at 0) answer the new balance", async (t) => {
      const { keyId } = await createKey(h, apiId, { credits: { remaining: 10, refill: { interval: "daily", amount: 10 } } });
      const set = await h.call("keys.updateCredits", { keyId, operation: "set", value: 3 });
      t.same(set.body.data, { remaining: 3, refill: { interval: "daily", amount: 10 } });
      t.same((await h.call("keys.updateCredits", { keyId, operation: "increment", value: 4 })).body.data.remaining, 7);
      t.same((await h.call("keys.updateCredits", { keyId, operation: "decrement", value: 5 })).body.data.remaining, 2);
      t.same((await h.call("keys.updateCredits", { keyId, operation: "decrement", value: 50 })).body.data.remaining, 0);
      t.equal((await getKey(h, keyId)).credits.remaining, 0);
    });

    await t.test("set null makes the key unlimited and drops the refill", async (t) => {
      const { keyId } = await createKey(h, apiId, { credits: { remaining: 10, refill: { interval: "daily", amount: 10 } } });
      const result = await h.call("keys.updateCredits", { keyId, operation: "set", value: null });
      t.same(result.body.data, { remaining: null });
      t.notOk("credits" in (await getKey(h, keyId)));
      const again = await h.call("keys.updateCredits", { keyId, operation: "set" });
      t.same(again.body.data, { remaining: null }, "an omitted value is null too");
    });

    await t.test("set gives an unlimited key a balance", async (t) => {
      const { keyId } = await createKey(h, apiId);
      t.same((await h.call("keys.updateCredits", { keyId, operation: "set", value: 8 })).body.data, { remaining: 8 });
    });

    await t.test("increment or decrement without a value, or on an unlimited key, is a 400", async (t) => {
      const limited = await createKey(h, apiId, { credits: { remaining: 1 } });
      assertInvalidAt(
        t,
        await h.call("keys.updateCredits", { keyId: limited.keyId, operation: "increment" }),
        "body.value",
        /must be provided/,
      );
      assertInvalidAt(
        t,
        await h.call("keys.updateCredits", { keyId: limited.keyId, operation: "decrement", value: null }),
        "body.value",
        /must be provided/,
      );
      const unlimited = await createKey(h, apiId);
      assertInvalidAt(
        t,
        await h.call("keys.updateCredits", { keyId: unlimited.keyId, operation: "increment", value: 1 }),
        "body.operation",
        /unlimited credits/,
      );
      assertInvalidAt(
        t,
        await h.call("keys.updateCredits", { keyId: limited.keyId, operation: "double", value: 1 }),
        "body.operation",
        /must be one of/,
      );
      assertInvalidAt(
        t,
        await h.call("keys.updateCredits", { keyId: limited.keyId, operation: "set", value: -1 }),
        "body.value",
        "must be greater than or equal to 0",
      );
      assertInvalidAt(t, await h.call("keys.updateCredits", { keyId: limited.keyId }), "body.operation", "is required");
    });

    await t.test("concurrent increments are all counted", async (t) => {
      const { keyId } = await createKey(h, apiId, { credits: { remaining: 0 } });
      await Promise.all(Array.from({ length: 30 }, () => h.call("keys.updateCredits", { keyId, operation: "increment", value: 2 })));
      t.equal((await getKey(h, keyId)).credits.remaining, 60);
    });

    await t.test("unknown and other workspaces' keys are 404", async (t) => {
      assertError(
        t,
        await h.call("keys.updateCredits", { keyId: "key_missing", operation: "set", value: 1 }),
        "err:unkey:data:key_not_found",
      );
      const { keyId } = await createKey(h, apiId, { credits: { remaining: 1 } });
      assertError(
        t,
        await h.call("keys.updateCredits", { keyId, operation: "set", value: 1 }, { rootKey: OTHER_ROOT_KEY }),
        "err:unkey:data:key_not_found",
      );
    });

    const target = await createKey(h, apiId, { credits: { remaining: 1 } });
    await checkUnauthenticated(t, h, "keys.updateCredits", { keyId: target.keyId, operation: "set", value: 1 });
    await checkPermissions(t, h, "keys.updateCredits", () => ({ keyId: target.keyId, operation: "set", value: 1 }), {
      missing: ["api.*.update_key"],
      accepted: [["api.*.update_key"], [`api.${apiId}.update_key`]],
    });
  });

  t.test(`credit refills on ${storage} stores, on an injected clock`, async (t) => {
    const clock = new ManualClock(Date.UTC(2026, 0, 31, 10));
    const h = await harness(t, { storage, clock });
    const apiId = await createApi(h);

    await t.test("a daily refill resets the balance at 00:00 UTC, not before", async (t) => {
      const { keyId } = await createKey(h, apiId, { credits: { remaining: 10, refill: { interval: "daily", amount: 10 } } });
      await h.call("keys.updateCredits", { keyId, operation: "set", value: 2 });
      clock.set(Date.UTC(2026, 0, 31, 23, 59, 59));
      t.equal((await getKey(h, keyId)).credits.remaining, 2);
      clock.set(Date.UTC(2026, 1, 1, 0, 0, 0));
      t.equal((await getKey(h, keyId)).credits.remaining, 10);
    });

    await t.test("a monthly refill on day 31 happens on the last day of February", async (t) => {
      clock.set(Date.UTC(2026, 0, 31, 10));
      const { keyId } = await createKey(h, apiId, { credits: { remaining: 5, refill: { interval: "monthly", amount: 5, refillDay: 31 } } });
      await h.call("keys.updateCredits", { keyId, operation: "set", value: 0 });
      clock.set(Date.UTC(2026, 1, 27, 23));
      t.equal((await getKey(h, keyId)).credits.remaining, 0);
      clock.set(Date.UTC(2026, 1, 28));
      t.equal((await getKey(h, keyId)).credits.remaining, 5);
    });

    await t.test("a balance above the refill amount is left as it is", async (t) => {
      clock.set(Date.UTC(2026, 3, 1, 12));
      const { keyId } = await createKey(h, apiId, { credits: { remaining: 50, refill: { interval: "daily", amount: 10 } } });
      clock.advance(86_400_000);
      t.equal((await getKey(h, keyId)).credits.remaining, 50);
    });
  });

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
