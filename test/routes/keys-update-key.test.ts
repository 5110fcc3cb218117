import t from "tap";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { ManualClock } from "../helpers/clock.js";
import { createApi, createKey, getKey } from "../helpers/fixtures.js";
import { harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

// keys.updateKey: each field set, cleared or kept; located 400s; other workspaces' keys are 404.

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
}
