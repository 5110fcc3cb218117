import { RatelimitRequest$outboundSchema } from "@unkey/api/models/components";
import t from "tap";
import { assertInvalidAt } from "../helpers/assertions.js";
import { createApi, createKey, getKey } from "../helpers/fixtures.js";
import { harness, STORAGE_KINDS } from "../helpers/harness.js";

/**
 * `ratelimits[].autoApply` is required in the official request schema (with `default: false`); keygate takes its
 * absence as false, its default. docs/api.md lists the difference.
 */

const WITHOUT_AUTO_APPLY = { name: "tokens", limit: 2, duration: 60_000 };

t.test("the official SDK always sends autoApply, false when the caller leaves it out", async (t) => {
  t.same(RatelimitRequest$outboundSchema.parse(WITHOUT_AUTO_APPLY), { ...WITHOUT_AUTO_APPLY, autoApply: false });
});

for (const storage of STORAGE_KINDS) {
  t.test(`a named limit without autoApply on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage });
    const apiId = await createApi(h);
    const limitsOf = (view: { ratelimits?: { name: string; autoApply: boolean }[] }) =>
      view.ratelimits?.map((limit) => [limit.name, limit.autoApply]);
    const verify = async (key: string, body: Record<string, unknown> = {}) => (await h.call("keys.verifyKey", { key, ...body })).body.data;

    await t.test("keys.createKey stores it with autoApply false: verification applies it only when asked", async (t) => {
      const { key, keyId } = await createKey(h, apiId, { ratelimits: [WITHOUT_AUTO_APPLY] });
      t.same(limitsOf(await getKey(h, keyId)), [["tokens", false]]);
      for (let i = 0; i < 3; i++) t.equal((await verify(key)).code, "VALID", `unnamed verification ${i + 1} does not count against it`);
      const asked = await verify(key, { ratelimits: [{ name: "tokens", cost: 2 }] });
      t.same([asked.code, asked.ratelimits?.[0]?.autoApply, asked.ratelimits?.[0]?.remaining], ["VALID", false, 0], "applied when named");
      t.equal((await verify(key, { ratelimits: [{ name: "tokens" }] })).code, "RATE_LIMITED");
    });

    await t.test("keys.updateKey stores it with autoApply false", async (t) => {
      const { keyId } = await createKey(h, apiId, { ratelimits: [{ ...WITHOUT_AUTO_APPLY, autoApply: true }] });
      t.equal((await h.call("keys.updateKey", { keyId, ratelimits: [WITHOUT_AUTO_APPLY] })).status, 200);
      t.same(limitsOf(await getKey(h, keyId)), [["tokens", false]], "replaced by the entry as given, with the default");
    });

    await t.test("identities.createIdentity and updateIdentity store it with autoApply false", async (t) => {
      t.equal((await h.call("identities.createIdentity", { externalId: "no_auto_apply", ratelimits: [WITHOUT_AUTO_APPLY] })).status, 200);
      t.same(limitsOf((await h.call("identities.getIdentity", { identity: "no_auto_apply" })).body.data), [["tokens", false]]);
      const updated = await h.call("identities.updateIdentity", {
        identity: "no_auto_apply",
        ratelimits: [{ ...WITHOUT_AUTO_APPLY, name: "requests" }],
      });
      t.equal(updated.status, 200);
      t.same(limitsOf(updated.body.data), [["requests", false]]);
    });

    await t.test("autoApply, when given, must be a boolean: null and strings are 400s at its location", async (t) => {
      const { keyId } = await createKey(h, apiId);
      for (const autoApply of [null, "true", 1]) {
        const entry = { ...WITHOUT_AUTO_APPLY, autoApply };
        const at = "body.ratelimits[0].autoApply";
        assertInvalidAt(t, await h.call("keys.createKey", { apiId, ratelimits: [entry] }), at, "must be a boolean");
        assertInvalidAt(t, await h.call("keys.updateKey", { keyId, ratelimits: [entry] }), at, "must be a boolean");
        assertInvalidAt(
          t,
          await h.call("identities.createIdentity", { externalId: "bad_auto_apply", ratelimits: [entry] }),
          at,
          "must be a boolean",
        );
        assertInvalidAt(
          t,
          await h.call("identities.updateIdentity", { identity: "no_auto_apply", ratelimits: [entry] }),
          at,
          "must be a boolean",
        );
      }
    });
  });
}
