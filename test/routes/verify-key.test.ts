import t from "tap";
import { assertError, assertInvalidAt, checkUnauthenticated } from "../helpers/assertions.js";
import { ManualClock } from "../helpers/clock.js";
import { createApi, createKey } from "../helpers/fixtures.js";
import { type Harness, harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

const verify = async (h: Harness, body: Record<string, unknown>, rootKey?: string) => {
  const result = await h.call("keys.verifyKey", body, rootKey === undefined ? {} : { rootKey });
  if (result.status !== 200) throw new Error(`verifyKey failed: ${JSON.stringify(result.body)}`);
  return result.body.data;
};

for (const storage of STORAGE_KINDS) {
  t.test(`keys.verifyKey on ${storage} stores`, async (t) => {
    const clock = new ManualClock(Date.UTC(2026, 5, 10, 12));
    const h = await harness(t, { storage, clock });
    const apiId = await createApi(h);
    await h.call("permissions.createRole", { name: "editor", permissions: ["documents.read", "documents.write"] });

    await t.test("VALID answers the key's fields, its permissions from roles and directly, and its identity", async (t) => {
      const { key, keyId } = await createKey(h, apiId, {
        name: "full",
        meta: { plan: "pro" },
        expires: Date.UTC(2030, 0, 1),
        roles: ["editor"],
        permissions: ["billing.read"],
        externalId: "acme",
      });
      const data = await verify(h, { key });
      t.same(
        { ...data, identity: { ...data.identity, id: undefined } },
        {
          valid: true,
          code: "VALID",
          keyId,
          name: "full",
          meta: { plan: "pro" },
          expires: Date.UTC(2030, 0, 1),
          enabled: true,
          permissions: ["billing.read", "documents.read", "documents.write"],
          roles: ["editor"],
          identity: { id: undefined, externalId: "acme" },
        },
      );
      t.match(data.identity.id, /^id_/);
    });

    await t.test("NOT_FOUND for unknown, deleted and other workspaces' keys and keys of deleted APIs, with no key fields", async (t) => {
      t.same(await verify(h, { key: "sk_does_not_exist" }), { valid: false, code: "NOT_FOUND" });
      const deleted = await createKey(h, apiId);
      t.equal((await verify(h, { key: deleted.key })).code, "VALID", "cached as valid first");
      await h.call("keys.deleteKey", { keyId: deleted.keyId });
      t.same(await verify(h, { key: deleted.key }), { valid: false, code: "NOT_FOUND" }, "refused at once after deletion");
      const theirApi = (await h.call("apis.createApi", { name: "theirs" }, { rootKey: OTHER_ROOT_KEY })).body.data.apiId;
      const theirs = (await h.call("keys.createKey", { apiId: theirApi }, { rootKey: OTHER_ROOT_KEY })).body.data;
      t.same(await verify(h, { key: theirs.key }), { valid: false, code: "NOT_FOUND" });
      t.equal((await verify(h, { key: theirs.key }, OTHER_ROOT_KEY)).code, "VALID", "its own workspace finds it");
      const doomedApi = await createApi(h, "doomed");
      const orphan = await createKey(h, doomedApi);
      t.equal((await verify(h, { key: orphan.key })).code, "VALID");
      await h.call("apis.deleteApi", { apiId: doomedApi });
      t.equal((await verify(h, { key: orphan.key })).code, "NOT_FOUND", "a deleted API's keys stop at once");
    });

    await t.test("a key created after its hash was looked up is found at once", async (t) => {
      const created = await createKey(h, apiId);
      t.equal((await verify(h, { key: created.key })).code, "VALID");
    });

    await t.test("DISABLED and EXPIRED still name the key; changes apply at once", async (t) => {
      const disabled = await createKey(h, apiId, { enabled: false, name: "off" });
      t.same(await verify(h, { key: disabled.key }), {
        valid: false,
        code: "DISABLED",
        keyId: disabled.keyId,
        name: "off",
        enabled: false,
      });
      await h.call("keys.updateKey", { keyId: disabled.keyId, enabled: true });
      t.equal((await verify(h, { key: disabled.key })).code, "VALID");
      const expiring = await createKey(h, apiId, { expires: clock.now() + 1_000 });
      t.equal((await verify(h, { key: expiring.key })).code, "VALID");
      clock.advance(1_000);
      const expired = await verify(h, { key: expiring.key });
      t.equal(expired.code, "EXPIRED");
      t.equal(expired.keyId, expiring.keyId);
      const past = await createKey(h, apiId, { expires: 5 });
      t.equal((await verify(h, { key: past.key })).code, "EXPIRED", "an expiry in the past invalidates at once");
    });

    await t.test("checks run in order: DISABLED before EXPIRED before permissions", async (t) => {
      const both = await createKey(h, apiId, { enabled: false, expires: 5 });
      t.equal((await verify(h, { key: both.key, permissions: "nothing.held" })).code, "DISABLED");
      const expired = await createKey(h, apiId, { expires: 5 });
      t.equal((await verify(h, { key: expired.key, permissions: "nothing.held" })).code, "EXPIRED");
    });

    await t.test("permission queries: AND, OR, parentheses and wildcards at any depth", async (t) => {
      const { key } = await createKey(h, apiId, { permissions: ["admin.*", "reports.read"], roles: ["editor"] });
      const cases: [string, string][] = [
        ["reports.read", "VALID"],
        ["reports.write", "INSUFFICIENT_PERMISSIONS"],
        ["documents.read AND documents.write", "VALID"],
        ["documents.delete OR documents.write", "VALID"],
        ["reports.read AND (documents.delete OR billing.read)", "INSUFFICIENT_PERMISSIONS"],
        ["admin.users", "VALID"],
        ["admin.users.delete.forever", "VALID"],
        ["admin", "INSUFFICIENT_PERMISSIONS"],
        ["reports.read and documents.write or nothing", "VALID"],
      ];
      for (const [query, code] of cases) t.equal((await verify(h, { key, permissions: query })).code, code, query);
      // Parsed texts are kept, a bounded number of them: the same answers after more distinct texts than are kept.
      for (let i = 0; i < 1_050; i++) await verify(h, { key, permissions: `reports.read OR other.${i}` });
      for (const [query, code] of cases) t.equal((await verify(h, { key, permissions: query })).code, code, `${query}, again`);
      const everything = await createKey(h, apiId, { permissions: ["*"] });
      t.equal((await verify(h, { key: everything.key, permissions: "any.thing AND other" })).code, "VALID", "* grants everything");
      const denied = await verify(h, { key, permissions: "reports.write" });
      t.equal(denied.keyId !== undefined && denied.valid === false, true);
    });

    await t.test("a syntax error is a 400 once the key exists, even disabled; an unknown key is NOT_FOUND without parsing", async (t) => {
      const disabled = await createKey(h, apiId, { enabled: false });
      const result = await h.call("keys.verifyKey", { key: disabled.key, permissions: "a AND (b OR" });
      assertError(t, result, "err:user:bad_request:permissions_query_syntax_error", /position 12/);
      t.equal((await verify(h, { key: "sk_unknown", permissions: "a AND (b OR" })).code, "NOT_FOUND");
      const { key } = await createKey(h, apiId);
      t.equal((await verify(h, { key })).code, "VALID", "cached");
      assertError(
        t,
        await h.call("keys.verifyKey", { key, permissions: "a AND (b OR" }),
        "err:user:bad_request:permissions_query_syntax_error",
        /position 12/,
      );
    });

    await t.test("role and permission changes apply at once", async (t) => {
      await h.call("permissions.createRole", { name: "shifting", permissions: ["x.read"] });
      const { key } = await createKey(h, apiId, { roles: ["shifting"] });
      t.equal((await verify(h, { key, permissions: "x.write" })).code, "INSUFFICIENT_PERMISSIONS");
      await h.call("permissions.setRolePermissions", { roleId: "shifting", permissions: ["x.read", "x.write"] });
      t.equal((await verify(h, { key, permissions: "x.write" })).code, "VALID");
      await h.call("permissions.deletePermission", { permission: "x.write" });
      t.equal((await verify(h, { key, permissions: "x.write" })).code, "INSUFFICIENT_PERMISSIONS");
      await h.call("permissions.deleteRole", { role: "shifting" });
      t.notOk("roles" in (await verify(h, { key })));
    });

    await t.test("credits: cost 1 by default, any cost given, cost 0 at zero, USAGE_EXCEEDED when short", async (t) => {
      const { key, keyId } = await createKey(h, apiId, { credits: { remaining: 3 } });
      t.same([(await verify(h, { key })).credits, (await verify(h, { key, credits: { cost: 2 } })).credits], [2, 0]);
      const short = await verify(h, { key });
      t.equal(short.code, "USAGE_EXCEEDED");
      t.equal(short.credits, 0);
      t.equal((await verify(h, { key, credits: { cost: 0 } })).code, "VALID", "cost 0 passes at zero");
      t.equal((await h.call("keys.getKey", { keyId })).body.data.credits.remaining, 0);
      const unlimited = await createKey(h, apiId);
      const answer = await verify(h, { key: unlimited.key, credits: { cost: 5 } });
      t.equal(answer.code, "VALID");
      t.notOk("credits" in answer, "an unlimited key shows no balance");
    });

    await t.test("credits refill across a day boundary on the injected clock", async (t) => {
      clock.set(Date.UTC(2026, 5, 10, 23, 59));
      const { key } = await createKey(h, apiId, { credits: { remaining: 1, refill: { interval: "daily", amount: 2 } } });
      t.equal((await verify(h, { key })).credits, 0);
      t.equal((await verify(h, { key })).code, "USAGE_EXCEEDED");
      clock.set(Date.UTC(2026, 5, 11, 0, 0, 1));
      t.same(
        [(await verify(h, { key })).credits, (await verify(h, { key })).credits, (await verify(h, { key })).code],
        [1, 0, "USAGE_EXCEEDED"],
      );
    });

    await t.test("updateCredits reaches verification at once", async (t) => {
      const { key, keyId } = await createKey(h, apiId, { credits: { remaining: 0 } });
      t.equal((await verify(h, { key })).code, "USAGE_EXCEEDED");
      await h.call("keys.updateCredits", { keyId, operation: "set", value: 1 });
      t.equal((await verify(h, { key })).code, "VALID");
      await h.call("keys.updateCredits", { keyId, operation: "set", value: null });
      t.equal((await verify(h, { key, credits: { cost: 100 } })).code, "VALID", "unlimited now");
    });

    await t.test("rate limits: autoApply limits always, others by name with a cost; the response reports each", async (t) => {
      const { key } = await createKey(h, apiId, {
        ratelimits: [
          { name: "requests", limit: 3, duration: 60_000, autoApply: true },
          { name: "tokens", limit: 10, duration: 60_000 },
        ],
      });
      const first = await verify(h, { key });
      t.same(
        first.ratelimits.map((r: any) => [r.name, r.remaining, r.exceeded, r.autoApply]),
        [["requests", 2, false, true]],
      );
      t.equal(first.ratelimits[0].reset, Math.ceil((clock.now() + 1) / 60_000) * 60_000, "reset is the unix ms end of the window");
      const withTokens = await verify(h, { key, ratelimits: [{ name: "tokens", cost: 7 }] });
      t.same(
        withTokens.ratelimits.map((r: any) => [r.name, r.remaining]),
        [
          ["requests", 1],
          ["tokens", 3],
        ],
      );
      const overTokens = await verify(h, { key, ratelimits: [{ name: "tokens", cost: 4 }] });
      t.equal(overTokens.code, "RATE_LIMITED");
      t.same(
        overTokens.ratelimits.map((r: any) => [r.name, r.exceeded]),
        [
          ["requests", false],
          ["tokens", true],
        ],
      );
      t.same(
        (await verify(h, { key })).ratelimits.map((r: any) => r.remaining),
        [0],
        "the denied call took nothing of 'requests'",
      );
      t.equal((await verify(h, { key })).code, "RATE_LIMITED");
      const peek = await verify(h, { key, ratelimits: [{ name: "requests", cost: 0 }] });
      t.equal(peek.code, "VALID", "cost 0 checks without taking: a full window is not over its limit");
      t.equal(peek.ratelimits[0].remaining, 0);
    });

    await t.test("a custom limit in the request counts on the key; an unknown name is a 412", async (t) => {
      const { key } = await createKey(h, apiId);
      const custom = { name: "burst", cost: 1, limit: 2, duration: 10_000 };
      t.same(
        [
          (await verify(h, { key, ratelimits: [custom] })).code,
          (await verify(h, { key, ratelimits: [custom] })).code,
          (await verify(h, { key, ratelimits: [custom] })).code,
        ],
        ["VALID", "VALID", "RATE_LIMITED"],
      );
      t.equal((await verify(h, { key, ratelimits: [custom] })).ratelimits[0].id, "", "a custom limit has no configured id");
      assertError(
        t,
        await h.call("keys.verifyKey", { key, ratelimits: [{ name: "nonexistent" }] }),
        "err:unkey:application:precondition_failed",
        /'nonexistent'.*no identity/,
      );
    });

    await t.test("identity limits are shared by the identity's keys; a key limit of the same name wins", async (t) => {
      await h.call("identities.createIdentity", {
        externalId: "team",
        ratelimits: [{ name: "shared", limit: 2, duration: 60_000, autoApply: true }],
      });
      const a = await createKey(h, apiId, { externalId: "team" });
      const b = await createKey(h, apiId, { externalId: "team" });
      const own = await createKey(h, apiId, {
        externalId: "team",
        ratelimits: [{ name: "shared", limit: 100, duration: 60_000, autoApply: true }],
      });
      t.same(
        [(await verify(h, { key: a.key })).code, (await verify(h, { key: b.key })).code, (await verify(h, { key: a.key })).code],
        ["VALID", "VALID", "RATE_LIMITED"],
      );
      t.equal((await verify(h, { key: b.key })).code, "RATE_LIMITED", "b shares a's window");
      const mine = await verify(h, { key: own.key });
      t.equal(mine.code, "VALID", "the key's own limit of the same name applies instead");
      t.equal(mine.ratelimits[0].limit, 100);
      assertError(
        t,
        await h.call("keys.verifyKey", { key: a.key, ratelimits: [{ name: "absent" }] }),
        "err:unkey:application:precondition_failed",
        /nor on its identity 'team'/,
      );
    });

    await t.test("all-or-nothing: a rate limit denial takes no credits, a credit denial takes no limits", async (t) => {
      const { key, keyId } = await createKey(h, apiId, {
        credits: { remaining: 1 },
        ratelimits: [
          { name: "wide", limit: 5, duration: 60_000, autoApply: true },
          { name: "narrow", limit: 1, duration: 60_000 },
        ],
      });
      t.equal((await verify(h, { key, ratelimits: [{ name: "narrow" }], credits: { cost: 0 } })).code, "VALID");
      const limited = await verify(h, { key, ratelimits: [{ name: "narrow" }] });
      t.equal(limited.code, "RATE_LIMITED");
      t.equal(limited.credits, undefined, "the balance is shown only once the limits passed, whichever path denied");
      t.equal((await h.call("keys.getKey", { keyId })).body.data.credits.remaining, 1, "no credit taken");
      t.equal(limited.ratelimits.find((r: any) => r.name === "wide").remaining, 4, "nor any of the limit that passed");
      const short = await verify(h, { key, credits: { cost: 2 } });
      t.equal(short.code, "USAGE_EXCEEDED");
      t.equal(short.ratelimits.find((r: any) => r.name === "wide").remaining, 4, "the limits were not taken either");
      t.equal((await h.call("keys.getKey", { keyId })).body.data.credits.remaining, 1);
    });

    await t.test("a denial by one exhausted limit shows no balance, however it was decided", async (t) => {
      const { key, keyId } = await createKey(h, apiId, {
        credits: { remaining: 5 },
        ratelimits: [{ name: "single", limit: 1, duration: 60_000, autoApply: true }],
      });
      const first = await verify(h, { key });
      t.match(first, { code: "VALID", credits: 4 });
      // On Redis the first denial teaches this instance that the window is full; later ones are decided without Redis.
      for (const attempt of [1, 2, 3]) {
        const denied = await verify(h, { key });
        t.equal(denied.code, "RATE_LIMITED", `attempt ${attempt}`);
        t.equal(denied.credits, undefined, `attempt ${attempt}: no balance`);
      }
      t.equal((await h.call("keys.getKey", { keyId })).body.data.credits.remaining, 4, "and none was taken");
    });

    await t.test("a root key without verify permission for the key's API gets NOT_FOUND; with none at all, 403", async (t) => {
      const { key } = await createKey(h, apiId);
      const otherApi = await h.rootKey(["api.api_someother.verify_key"]);
      t.same(await verify(h, { key }, otherApi), { valid: false, code: "NOT_FOUND" });
      for (const permissions of [["api.*.verify_key"], [`api.${apiId}.verify_key`], [`api.${apiId}.*`], ["api.*"], ["*"]]) {
        t.equal((await verify(h, { key }, await h.rootKey(permissions))).code, "VALID", permissions.join(","));
      }
      const none = await h.rootKey(["api.*.read_key"]);
      assertError(
        t,
        await h.call("keys.verifyKey", { key }, { rootKey: none }),
        "err:unkey:authorization:insufficient_permissions",
        /api\.\*\.verify_key/,
      );
    });

    await t.test("bad bodies are located 400s", async (t) => {
      const cases: [Record<string, unknown>, string, string | RegExp][] = [
        [{}, "body.key", "is required"],
        [{ key: "" }, "body.key", "must be at least 1 character long"],
        [{ key: "k".repeat(513) }, "body.key", "must be at most 512 characters long"],
        [{ key: "k", apiId }, "body.apiId", "is not a known field"],
        [{ key: "k", tags: ["bad tag"] }, "body.tags[0]", /^must contain only /],
        [{ key: "k", tags: Array.from({ length: 21 }, (_, i) => `t${i}`) }, "body.tags", "must contain at most 20 items"],
        [{ key: "k", permissions: "" }, "body.permissions", "must be at least 1 character long"],
        [{ key: "k", permissions: "p".repeat(1001) }, "body.permissions", "must be at most 1000 characters long"],
        [{ key: "k", credits: { cost: -1 } }, "body.credits.cost", "must be greater than or equal to 0"],
        [{ key: "k", credits: {} }, "body.credits.cost", "is required"],
        [{ key: "k", ratelimits: [{ name: "ab" }] }, "body.ratelimits[0].name", "must be at least 3 characters long"],
        [{ key: "k", ratelimits: [{ name: "abc", cost: -1 }] }, "body.ratelimits[0].cost", "must be greater than or equal to 0"],
        [{ key: "k", ratelimits: [{ name: "abc", limit: 5 }] }, "body.ratelimits[0].duration", /is required when a custom limit/],
        [
          { key: "k", ratelimits: [{ name: "abc", limit: 5, duration: 10 }] },
          "body.ratelimits[0].duration",
          "must be greater than or equal to 1000",
        ],
      ];
      for (const [body, location, message] of cases) assertInvalidAt(t, await h.call("keys.verifyKey", body), location, message);
    });

    await checkUnauthenticated(t, h, "keys.verifyKey", { key: "k" });
  });
}
