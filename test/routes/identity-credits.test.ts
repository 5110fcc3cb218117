import t from "tap";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { ManualClock } from "../helpers/clock.js";
import { createApi, createKey, getKey } from "../helpers/fixtures.js";
import { type Harness, harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

// Identity credits (keygate's extension): the record, keygate.updateIdentityCredits, and which balance a
// verification spends, on an injected clock.

let identities = 0;

async function createIdentity(h: Harness, fields: Record<string, unknown> = {}): Promise<{ id: string; externalId: string }> {
  const externalId = `customer_${identities++}`;
  const result = await h.call("identities.createIdentity", { externalId, ...fields });
  if (result.status !== 200) throw new Error(`createIdentity failed: ${JSON.stringify(result.body)}`);
  return { id: result.body.data.identityId, externalId };
}

const verify = async (h: Harness, key: string, body: Record<string, unknown> = {}) =>
  (await h.call("keys.verifyKey", { key, ...body })).body.data;

const identityCredits = async (h: Harness, identity: string) => (await h.call("identities.getIdentity", { identity })).body.data.credits;

for (const storage of STORAGE_KINDS) {
  t.test(`identity credits on ${storage} stores`, async (t) => {
    const clock = new ManualClock(Date.UTC(2026, 0, 31, 10));
    const h = await harness(t, { storage, clock });
    const apiId = await createApi(h);

    await t.test("createIdentity takes credits; getIdentity and listIdentities show them", async (t) => {
      const { id, externalId } = await createIdentity(h, {
        credits: { remaining: 100, refill: { interval: "daily", amount: 100 }, lowThreshold: 10 },
      });
      const shown = { remaining: 100, refill: { interval: "daily", amount: 100 }, lowThreshold: 10 };
      t.same(await identityCredits(h, id), shown);
      t.same(await identityCredits(h, externalId), shown, "by externalId too");
      const listed = (await h.call("identities.listIdentities", { limit: 100 })).body.data;
      t.same(listed.find((identity: { id: string }) => identity.id === id).credits, shown);
      const plain = await createIdentity(h);
      t.notOk("credits" in (await h.call("identities.getIdentity", { identity: plain.id })).body.data, "none without a balance");
    });

    await t.test("updateIdentity's credits are three-state, as updateKey's", async (t) => {
      const { id } = await createIdentity(h, { credits: { remaining: 5, refill: { interval: "daily", amount: 5 } } });
      const answered = await h.call("identities.updateIdentity", { identity: id, credits: { remaining: 7, lowThreshold: 2 } });
      t.same(
        answered.body.data.credits,
        { remaining: 7, refill: { interval: "daily", amount: 5 }, lowThreshold: 2 },
        "omitted refill stays",
      );
      await h.call("identities.updateIdentity", { identity: id, credits: { refill: null } });
      t.same(await identityCredits(h, id), { remaining: 7, lowThreshold: 2 }, "refill: null drops only the refill");
      await h.call("identities.updateIdentity", { identity: id, credits: { lowThreshold: null } });
      t.same(await identityCredits(h, id), { remaining: 7 }, "lowThreshold: null drops the threshold");
      await h.call("identities.updateIdentity", { identity: id, meta: { plan: "pro" } });
      t.same(await identityCredits(h, id), { remaining: 7 }, "an update without credits leaves them");
      const cleared = await h.call("identities.updateIdentity", { identity: id, credits: null });
      t.notOk("credits" in cleared.body.data, "null removes the balance");
      const given = await h.call("identities.updateIdentity", { identity: id, credits: { remaining: 3 } });
      t.same(given.body.data.credits, { remaining: 3 });
    });

    await t.test("keygate.updateIdentityCredits sets, increments and decrements (floored at 0)", async (t) => {
      const { id, externalId } = await createIdentity(h, { credits: { remaining: 10, lowThreshold: 4 } });
      const set = await h.call("keygate.updateIdentityCredits", { identity: externalId, operation: "set", value: 3 });
      t.same(set.body.data, { remaining: 3, lowThreshold: 4 }, "set keeps the threshold");
      t.equal((await h.call("keygate.updateIdentityCredits", { identity: id, operation: "increment", value: 4 })).body.data.remaining, 7);
      t.equal((await h.call("keygate.updateIdentityCredits", { identity: id, operation: "decrement", value: 50 })).body.data.remaining, 0);
      t.same((await h.call("keygate.updateIdentityCredits", { identity: id, operation: "set", value: null })).body.data, {
        remaining: null,
      });
      t.notOk(await identityCredits(h, id), "set null removes the balance");
      t.same((await h.call("keygate.updateIdentityCredits", { identity: id, operation: "set", value: 8 })).body.data, { remaining: 8 });
    });

    await t.test("refusals: 400 for what cannot be done, 404 for unknown and other workspaces' identities", async (t) => {
      const { id } = await createIdentity(h, { credits: { remaining: 1 } });
      const unlimited = await createIdentity(h);
      assertInvalidAt(
        t,
        await h.call("keygate.updateIdentityCredits", { identity: id, operation: "increment" }),
        "body.value",
        /must be provided/,
      );
      assertInvalidAt(
        t,
        await h.call("keygate.updateIdentityCredits", { identity: unlimited.id, operation: "decrement", value: 1 }),
        "body.operation",
        /an identity with unlimited credits/,
      );
      assertInvalidAt(
        t,
        await h.call("keygate.updateIdentityCredits", { identity: id, operation: "set", value: -1 }),
        "body.value",
        "must be greater than or equal to 0",
      );
      assertInvalidAt(
        t,
        await h.call("identities.createIdentity", { externalId: "threshold_alone", credits: { remaining: null, lowThreshold: 3 } }),
        "body.credits.lowThreshold",
        /needs a balance/,
      );
      assertInvalidAt(
        t,
        await h.call("identities.updateIdentity", { identity: unlimited.id, credits: { lowThreshold: 3 } }),
        "body.credits.lowThreshold",
        /needs a balance/,
      );
      assertInvalidAt(
        t,
        await h.call("identities.updateIdentity", { identity: unlimited.id, credits: { refill: { interval: "daily", amount: 1 } } }),
        "body.credits.remaining",
        /on an identity with unlimited credits/,
      );
      t.notOk(await identityCredits(h, unlimited.id), "a refused update wrote nothing");
      assertError(
        t,
        await h.call("keygate.updateIdentityCredits", { identity: "nobody", operation: "set", value: 1 }),
        "err:unkey:data:identity_not_found",
      );
      assertError(
        t,
        await h.call("keygate.updateIdentityCredits", { identity: id, operation: "set", value: 1 }, { rootKey: OTHER_ROOT_KEY }),
        "err:unkey:data:identity_not_found",
      );
      await h.call("identities.deleteIdentity", { identity: id });
      assertError(
        t,
        await h.call("keygate.updateIdentityCredits", { identity: id, operation: "set", value: 1 }),
        "err:unkey:data:identity_not_found",
        /does not exist/,
      );
    });

    await t.test("a key without credits spends its identity's; the answer says which balance paid", async (t) => {
      const { id, externalId } = await createIdentity(h, { credits: { remaining: 3 } });
      const shared = [await createKey(h, apiId, { externalId }), await createKey(h, apiId, { externalId })];
      const first = await verify(h, (shared[0] as { key: string }).key);
      t.match(first, { valid: true, code: "VALID", credits: 2, creditsSource: "identity" });
      t.match(await verify(h, (shared[1] as { key: string }).key, { credits: { cost: 2 } }), {
        valid: true,
        credits: 0,
        creditsSource: "identity",
      });
      t.match(await verify(h, (shared[0] as { key: string }).key), {
        valid: false,
        code: "USAGE_EXCEEDED",
        credits: 0,
        creditsSource: "identity",
      });
      t.same(await identityCredits(h, id), { remaining: 0 });
      t.notOk("credits" in (await getKey(h, (shared[0] as { keyId: string }).keyId)), "the key itself stays unlimited");

      const own = await createKey(h, apiId, { externalId, credits: { remaining: 5 } });
      t.match(await verify(h, own.key), { valid: true, credits: 4, creditsSource: "key" }, "a key's own balance wins");
      t.same(await identityCredits(h, id), { remaining: 0 }, "the identity's was not touched");

      const alone = await createKey(h, apiId, { credits: { remaining: 5 } });
      const plain = await verify(h, alone.key);
      t.equal(plain.credits, 4);
      t.notOk("creditsSource" in plain, "a key whose identity has no balance answers as before");
      const unlimited = await verify(h, (await createKey(h, apiId)).key);
      t.notOk("credits" in unlimited || "creditsSource" in unlimited);
    });

    await t.test("a cached key view learns of identity credits given or taken away", async (t) => {
      const { id, externalId } = await createIdentity(h);
      const { key } = await createKey(h, apiId, { externalId });
      t.notOk("credits" in (await verify(h, key)), "unlimited, and now cached");
      await h.call("keygate.updateIdentityCredits", { identity: id, operation: "set", value: 2 });
      t.match(await verify(h, key), { credits: 1, creditsSource: "identity" });
      await h.call("identities.updateIdentity", { identity: id, credits: null });
      t.notOk("credits" in (await verify(h, key)), "unlimited again");
      await h.call("identities.updateIdentity", { identity: id, credits: { remaining: 1 } });
      t.match(await verify(h, key), { credits: 0, creditsSource: "identity" });
      await h.call("identities.deleteIdentity", { identity: id });
      t.notOk("credits" in (await verify(h, key)), "a deleted identity pays for nothing");
    });

    await t.test("a key whose own credits are taken away spends its identity's from then on", async (t) => {
      const { id, externalId } = await createIdentity(h, { credits: { remaining: 10 } });
      const { key, keyId } = await createKey(h, apiId, { externalId, credits: { remaining: 3 } });
      t.match(await verify(h, key), { credits: 2, creditsSource: "key" });
      await h.call("keys.updateKey", { keyId, credits: null });
      t.match(await verify(h, key), { credits: 9, creditsSource: "identity" });
      await h.call("keys.updateCredits", { keyId, operation: "set", value: 1 });
      t.match(await verify(h, key), { credits: 0, creditsSource: "key" }, "and its own again once it has some");
      t.same(await identityCredits(h, id), { remaining: 9 });
    });

    await t.test("an identity's balance refills on schedule", async (t) => {
      clock.set(Date.UTC(2026, 0, 31, 10));
      const { id, externalId } = await createIdentity(h, { credits: { remaining: 1, refill: { interval: "daily", amount: 2 } } });
      const { key } = await createKey(h, apiId, { externalId });
      t.match(await verify(h, key), { valid: true, credits: 0 });
      const exceeded = await h.call("keys.verifyKey", { key });
      t.equal(exceeded.body.data.code, "USAGE_EXCEEDED");
      clock.set(Date.UTC(2026, 0, 31, 23, 59, 59));
      t.equal((await verify(h, key)).code, "USAGE_EXCEEDED", "not before 00:00 UTC");
      clock.set(Date.UTC(2026, 1, 1));
      t.match(await verify(h, key), { valid: true, credits: 1, creditsSource: "identity" }, "refilled to 2, one spent");
      t.same(await identityCredits(h, id), { remaining: 1, refill: { interval: "daily", amount: 2 } });
    });

    await t.test("a key's low threshold is set on create and update, and shown by getKey", async (t) => {
      const { keyId } = await createKey(h, apiId, { credits: { remaining: 10, lowThreshold: 3 } });
      t.same((await getKey(h, keyId)).credits, { remaining: 10, lowThreshold: 3 });
      await h.call("keys.updateKey", { keyId, credits: { lowThreshold: 5 } });
      t.same((await getKey(h, keyId)).credits, { remaining: 10, lowThreshold: 5 });
      await h.call("keys.updateCredits", { keyId, operation: "decrement", value: 4 });
      t.same((await getKey(h, keyId)).credits, { remaining: 6, lowThreshold: 5 }, "kept as the balance moves");
      const { key } = await createKey(h, apiId, { credits: { remaining: 2, lowThreshold: 1 } });
      await verify(h, key);
      const spent = await h.call("keys.whoami", { key });
      t.same(spent.body.data.credits, { remaining: 1, lowThreshold: 1 }, "kept when a verification spends");
    });

    const target = await createIdentity(h, { credits: { remaining: 1 } });
    await checkUnauthenticated(t, h, "keygate.updateIdentityCredits", { identity: target.id, operation: "set", value: 1 });
    await checkPermissions(t, h, "keygate.updateIdentityCredits", () => ({ identity: target.id, operation: "set", value: 1 }), {
      missing: ["identity.*.update_identity", `identity.${target.id}.update_identity`],
      accepted: [["identity.*.update_identity"], [`identity.${target.id}.update_identity`]],
    });
  });
}
