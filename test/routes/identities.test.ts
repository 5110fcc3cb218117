import t from "tap";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { createApi, createKey, getKey } from "../helpers/fixtures.js";
import { harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

for (const storage of STORAGE_KINDS) {
  t.test(`identities.* on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage });

    await t.test("create, then get by id and by externalId", async (t) => {
      const created = await h.call("identities.createIdentity", {
        externalId: "user_42",
        meta: { email: "a@example.com" },
        ratelimits: [{ name: "requests", limit: 10, duration: 1000, autoApply: true }],
      });
      t.equal(created.status, 200);
      t.match(created.body.data.identityId, /^id_/);
      for (const identity of [created.body.data.identityId, "user_42"]) {
        const read = await h.call("identities.getIdentity", { identity });
        t.equal(read.body.data.id, created.body.data.identityId);
        t.equal(read.body.data.externalId, "user_42");
        t.same(read.body.data.meta, { email: "a@example.com" });
        t.same(
          read.body.data.ratelimits.map((r: any) => [r.name, r.limit, r.duration, r.autoApply]),
          [["requests", 10, 1000, true]],
        );
        t.match(read.body.data.ratelimits[0].id, /^rl_/);
      }
    });

    await t.test("a taken externalId is a 409; concurrent creates give one success", async (t) => {
      assertError(
        t,
        await h.call("identities.createIdentity", { externalId: "user_42" }),
        "err:unkey:data:identity_already_exists",
        /user_42/,
      );
      const results = await Promise.all(Array.from({ length: 12 }, () => h.call("identities.createIdentity", { externalId: "racer" })));
      t.equal(results.filter((r) => r.status === 200).length, 1);
      t.equal(results.filter((r) => r.status === 409).length, 11);
    });

    await t.test("update replaces meta and limits by name, keeping ids", async (t) => {
      const before = (await h.call("identities.getIdentity", { identity: "user_42" })).body.data;
      const result = await h.call("identities.updateIdentity", {
        identity: "user_42",
        meta: { email: "b@example.com" },
        ratelimits: [
          { name: "requests", limit: 20, duration: 2000 },
          { name: "tokens", limit: 5, duration: 60_000 },
        ],
      });
      t.equal(result.status, 200);
      t.same(result.body.data.meta, { email: "b@example.com" });
      t.equal(result.body.data.ratelimits.find((r: any) => r.name === "requests").id, before.ratelimits[0].id);
      t.same((await h.call("identities.getIdentity", { identity: "user_42" })).body.data, result.body.data);
      assertInvalidAt(
        t,
        await h.call("identities.updateIdentity", {
          identity: "user_42",
          ratelimits: [
            { name: "dup", limit: 1, duration: 1000 },
            { name: "dup", limit: 1, duration: 1000 },
          ],
        }),
        "body.ratelimits[1].name",
        /repeats/,
      );
    });

    await t.test("delete frees the externalId; keys keep working without the identity", async (t) => {
      const apiId = await createApi(h);
      const { keyId } = await createKey(h, apiId, { externalId: "leaving" });
      t.same((await h.call("identities.deleteIdentity", { identity: "leaving" })).body.data, {});
      assertError(t, await h.call("identities.getIdentity", { identity: "leaving" }), "err:unkey:data:identity_not_found");
      const again404 = await h.call("identities.deleteIdentity", { identity: "leaving" });
      assertError(t, again404, "err:unkey:data:identity_not_found");
      t.match(again404.headers["content-type"], /^application\/problem\+json/, "the SDK expects deleteIdentity's errors as problem+json");
      t.match(
        (await h.call("identities.getIdentity", { identity: "leaving" })).headers["content-type"],
        /^application\/json/,
        "other procedures' errors stay JSON",
      );
      const key = await getKey(h, keyId);
      t.notOk("identity" in key, "the key lost its identity");
      const again = await h.call("identities.createIdentity", { externalId: "leaving" });
      t.equal(again.status, 200, "the externalId can be used again at once");
      t.equal((await h.call("identities.deleteIdentity", { identity: again.body.data.identityId })).status, 200, "and deleted again");
    });

    await t.test("list pages through live identities; search filters", async (t) => {
      for (let i = 0; i < 11; i++) await h.call("identities.createIdentity", { externalId: `listed_${i}` });
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await h.call("identities.listIdentities", { limit: 3, ...(cursor ? { cursor } : {}) });
        seen.push(...page.body.data.map((i: any) => i.externalId));
        cursor = page.body.pagination.cursor;
      } while (cursor);
      t.equal(new Set(seen).size, seen.length);
      t.equal(seen.filter((id) => id.startsWith("listed_")).length, 11);
      t.notOk(seen.includes("leaving"), "deleted identities are not listed");
      t.equal((await h.call("identities.listIdentities", { search: "LISTED_1" })).body.data.length, 2);
    });

    await t.test("listing needs read_identity for every identity listed", async (t) => {
      const target = (await h.call("identities.getIdentity", { identity: "user_42" })).body.data.id;
      const one = await h.rootKey([`identity.${target}.read_identity`]);
      assertError(t, await h.call("identities.listIdentities", {}, { rootKey: one }), "err:unkey:authorization:insufficient_permissions");
      t.equal((await h.call("identities.getIdentity", { identity: target }, { rootKey: one })).status, 200, "but may read that one");
    });

    await t.test("another workspace's identities are 404 and not listed", async (t) => {
      const theirs = (await h.call("identities.createIdentity", { externalId: "their_user" }, { rootKey: OTHER_ROOT_KEY })).body.data
        .identityId;
      for (const procedure of ["identities.getIdentity", "identities.updateIdentity", "identities.deleteIdentity"]) {
        assertError(t, await h.call(procedure, { identity: theirs }), "err:unkey:data:identity_not_found");
      }
      t.same(
        (await h.call("identities.listIdentities", {}, { rootKey: OTHER_ROOT_KEY })).body.data.map((i: any) => i.externalId),
        ["their_user"],
      );
      t.equal(
        (await h.call("identities.createIdentity", { externalId: "user_42" }, { rootKey: OTHER_ROOT_KEY })).status,
        200,
        "externalIds are per workspace",
      );
    });

    await t.test("bad bodies are located 400s", async (t) => {
      assertInvalidAt(t, await h.call("identities.createIdentity", {}), "body.externalId", "is required");
      assertInvalidAt(
        t,
        await h.call("identities.createIdentity", { externalId: "" }),
        "body.externalId",
        "must be at least 1 character long",
      );
      assertInvalidAt(
        t,
        await h.call("identities.createIdentity", { externalId: "x".repeat(256) }),
        "body.externalId",
        "must be at most 255 characters long",
      );
      assertInvalidAt(t, await h.call("identities.createIdentity", { externalId: "a b" }), "body.externalId", /^must contain only /);
      assertInvalidAt(
        t,
        await h.call("identities.createIdentity", {
          externalId: "m1",
          meta: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, 1])),
        }),
        "body.meta",
        "must have at most 100 properties",
      );
      assertInvalidAt(
        t,
        await h.call("identities.createIdentity", { externalId: "m2", meta: { big: "x".repeat(1024 * 1024) } }),
        "body.meta",
        /must be at most 1048576 bytes/,
      );
      assertInvalidAt(
        t,
        await h.call("identities.createIdentity", { externalId: "m3", ratelimits: [{ name: "r", limit: 1, duration: 1000 }] }),
        "body.ratelimits[0].name",
        "must be at least 3 characters long",
      );
      assertInvalidAt(t, await h.call("identities.getIdentity", {}), "body.identity", "is required");
      assertInvalidAt(
        t,
        await h.call("identities.updateIdentity", { identity: "user_42", externalId: "new" }),
        "body.externalId",
        "is not a known field",
      );
      assertInvalidAt(t, await h.call("identities.listIdentities", { limit: 500 }), "body.limit", "must be less than or equal to 100");
    });

    await checkUnauthenticated(t, h, "identities.createIdentity", { externalId: "x" });
    let n = 0;
    await checkPermissions(t, h, "identities.createIdentity", () => ({ externalId: `auth_${n++}` }), {
      missing: ["identity.*.create_identity"],
      accepted: [["identity.*.create_identity"]],
    });
    const target = (await h.call("identities.getIdentity", { identity: "user_42" })).body.data.id;
    await checkUnauthenticated(t, h, "identities.getIdentity", { identity: target });
    await checkPermissions(t, h, "identities.getIdentity", () => ({ identity: target }), {
      missing: ["identity.*.read_identity", `identity.${target}.read_identity`],
      accepted: [["identity.*.read_identity"], [`identity.${target}.read_identity`]],
    });
    await checkUnauthenticated(t, h, "identities.listIdentities", {});
    await checkPermissions(t, h, "identities.listIdentities", () => ({}), {
      missing: ["identity.*.read_identity"],
      accepted: [["identity.*.read_identity"]],
    });
    await checkUnauthenticated(t, h, "identities.updateIdentity", { identity: target });
    await checkPermissions(t, h, "identities.updateIdentity", () => ({ identity: target, meta: {} }), {
      missing: ["identity.*.update_identity"],
      accepted: [["identity.*.update_identity"], [`identity.${target}.update_identity`]],
    });
    await checkUnauthenticated(t, h, "identities.deleteIdentity", { identity: target });
    await checkPermissions(
      t,
      h,
      "identities.deleteIdentity",
      async () => ({ identity: (await h.call("identities.createIdentity", { externalId: `doomed_${n++}` })).body.data.identityId }),
      {
        missing: ["identity.*.delete_identity"],
        accepted: [["identity.*.delete_identity"]],
      },
    );
  });
}
