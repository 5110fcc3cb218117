import t from "tap";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { ManualClock } from "../helpers/clock.js";
import { createApi, createKey, getKey } from "../helpers/fixtures.js";
import { harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

// keys.updateCredits and credit refills on an injected clock.

for (const storage of STORAGE_KINDS) {
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
}
