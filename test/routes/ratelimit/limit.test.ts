import t from "tap";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../../helpers/assertions.js";
import { ManualClock } from "../../helpers/clock.js";
import { type Harness, harness, OTHER_ROOT_KEY, STORAGE_KINDS, WORKSPACE } from "../../helpers/harness.js";

const DURATION = 10_000;
/** Window 200,000,000 of DURATION starts here (an instant in 2033). */
const WINDOW_START = 200_000_000 * DURATION;

/** The namespace's id, read from the store (the API never returns it for limit calls). */
async function namespaceId(h: Harness, name: string): Promise<string> {
  const namespace = await h.app.stores.ratelimitNamespaces.findNamespaceByName(WORKSPACE, name);
  if (!namespace) throw new Error(`no namespace ${name}`);
  return namespace.id;
}

for (const storage of STORAGE_KINDS) {
  t.test(`ratelimit.limit on ${storage} stores`, async (t) => {
    const clock = new ManualClock(WINDOW_START);
    const h = await harness(t, { storage, clock });
    let serial = 0;
    const fresh = (label: string) => `${label}-${++serial}`;
    const limit = (body: Record<string, unknown>, rootKey?: string) =>
      h.call("ratelimit.limit", { limit: 3, duration: DURATION, ...body }, rootKey === undefined ? {} : { rootKey });

    await t.test("answers limit, remaining, reset and success: the limit-th call passes and the next is denied", async (t) => {
      const identifier = fresh("user");
      const answers = [];
      for (let i = 0; i < 4; i++) answers.push((await limit({ namespace: "api", identifier })).body.data);
      const reset = WINDOW_START + DURATION;
      t.same(answers, [
        { limit: 3, remaining: 2, reset, success: true },
        { limit: 3, remaining: 1, reset, success: true },
        { limit: 3, remaining: 0, reset, success: true },
        { limit: 3, remaining: 0, reset, success: false },
      ]);
    });

    await t.test("ratelimit.limit and ratelimits.limit are one procedure with one counter", async (t) => {
      const identifier = fresh("user");
      t.equal((await h.call("ratelimit.limit", { namespace: "api", identifier, limit: 2, duration: DURATION })).body.data.remaining, 1);
      const second = await h.call("ratelimits.limit", { namespace: "api", identifier, limit: 2, duration: DURATION });
      t.equal(second.status, 200);
      t.same(second.body.data, { limit: 2, remaining: 0, reset: WINDOW_START + DURATION, success: true });
    });

    await t.test("a cost larger than what remains is denied, consumes nothing, and reports what really remains", async (t) => {
      const identifier = fresh("user");
      await limit({ namespace: "api", identifier, limit: 10, cost: 7 });
      const denied = await limit({ namespace: "api", identifier, limit: 10, cost: 4 });
      t.same([denied.body.data.success, denied.body.data.remaining], [false, 3]);
      const rest = await limit({ namespace: "api", identifier, limit: 10, cost: 3 });
      t.same([rest.body.data.success, rest.body.data.remaining], [true, 0], "the 3 were still there");
    });

    await t.test("cost 0 checks without consuming", async (t) => {
      const identifier = fresh("user");
      for (let i = 0; i < 3; i++)
        t.same((await limit({ namespace: "api", identifier, cost: 0 })).body.data, {
          limit: 3,
          remaining: 3,
          reset: WINDOW_START + DURATION,
          success: true,
        });
      await limit({ namespace: "api", identifier, cost: 3 });
      t.equal(
        (await limit({ namespace: "api", identifier, cost: 0 })).body.data.success,
        true,
        "at the limit (not over it) a check still passes",
      );
      t.equal((await limit({ namespace: "api", identifier })).body.data.success, false);
    });

    await t.test("across a window boundary the previous window fades out instead of resetting at once", async (t) => {
      const identifier = fresh("user");
      const boundary = new ManualClock(WINDOW_START);
      const b = await harness(t, { storage, clock: boundary });
      const call = () => b.call("ratelimit.limit", { namespace: "boundary", identifier, limit: 4, duration: DURATION });
      for (let i = 0; i < 4; i++) await call();
      t.equal((await call()).body.data.success, false);
      boundary.set(WINDOW_START + DURATION);
      const first = (await call()).body.data;
      t.same(
        first,
        { limit: 4, remaining: 0, reset: WINDOW_START + 2 * DURATION, success: true },
        "at the new window's first ms 3 of the previous 4 still count",
      );
      t.equal((await call()).body.data.success, false);
      boundary.set(WINDOW_START + DURATION + DURATION / 2);
      t.equal((await call()).body.data.remaining, 1, "halfway: 1 now + floor(4 × 4999/10000) = 1 + 1 used, 1 more taken, 1 left");
      boundary.set(WINDOW_START + 3 * DURATION);
      t.equal((await call()).body.data.remaining, 3, "after a whole idle window nothing counts");
    });

    await t.test("another limit or duration for the same identifier is a fresh bucket", async (t) => {
      const identifier = fresh("user");
      for (let i = 0; i < 3; i++) await limit({ namespace: "api", identifier });
      t.equal((await limit({ namespace: "api", identifier })).body.data.success, false);
      t.equal((await limit({ namespace: "api", identifier, limit: 4 })).body.data.remaining, 3);
      t.equal((await limit({ namespace: "api", identifier, duration: 2 * DURATION })).body.data.remaining, 2);
    });

    await t.test("namespaces and workspaces count apart", async (t) => {
      const identifier = fresh("user");
      for (let i = 0; i < 3; i++) await limit({ namespace: "api", identifier });
      t.equal((await limit({ namespace: "other-namespace", identifier })).body.data.success, true);
      t.equal(
        (await limit({ namespace: "api", identifier }, OTHER_ROOT_KEY)).body.data.success,
        true,
        "the same names in another workspace",
      );
    });

    await t.test("a namespace can be named by its rlns_ id; an rlns_ id that matches nothing is 404 and creates nothing", async (t) => {
      const identifier = fresh("user");
      await limit({ namespace: "by-id", identifier });
      const id = await namespaceId(h, "by-id");
      t.match(id, /^rlns_[1-9A-HJ-NP-Za-km-z]+$/);
      t.equal((await limit({ namespace: id, identifier })).body.data.remaining, 1, "same counter as by name");
      assertError(
        t,
        await limit({ namespace: "rlns_doesnotexist", identifier }),
        "err:unkey:data:ratelimit_namespace_not_found",
        /rlns_doesnotexist/,
      );
      t.equal(await h.app.stores.ratelimitNamespaces.findNamespaceByName(WORKSPACE, "rlns_doesnotexist"), null);
      const theirs = await h.call(
        "ratelimit.limit",
        { namespace: "theirs", identifier, limit: 3, duration: DURATION },
        { rootKey: OTHER_ROOT_KEY },
      );
      t.equal(theirs.status, 200);
      const theirId = (await h.app.stores.ratelimitNamespaces.findNamespaceByName("ws_other", "theirs"))?.id as string;
      assertError(t, await limit({ namespace: theirId, identifier }), "err:unkey:data:ratelimit_namespace_not_found", new RegExp(theirId));
    });

    await t.test("an unknown namespace is created on first use only when the root key may create it", async (t) => {
      const name = fresh("new-namespace");
      const limitOnly = await h.rootKey(["ratelimit.*.limit"]);
      const denied = await limit({ namespace: name, identifier: "x" }, limitOnly);
      assertError(t, denied, "err:unkey:authorization:insufficient_permissions", /ratelimit\.\*\.create_namespace/);
      t.match(denied.body.error.detail, name, "the detail names the namespace");
      t.equal(await h.app.stores.ratelimitNamespaces.findNamespaceByName(WORKSPACE, name), null, "nothing was created");
      const createOnly = await h.rootKey(["ratelimit.*.create_namespace"]);
      assertError(
        t,
        await limit({ namespace: name, identifier: "x" }, createOnly),
        "err:unkey:authorization:insufficient_permissions",
        /ratelimit\.\*\.limit/,
      );
      t.equal(await h.app.stores.ratelimitNamespaces.findNamespaceByName(WORKSPACE, name), null, "creating needs the limit permission too");
      const both = await h.rootKey(["ratelimit.*.limit", "ratelimit.*.create_namespace"]);
      t.equal((await limit({ namespace: name, identifier: "x" }, both)).body.data.remaining, 2);
      t.equal(
        (await limit({ namespace: name, identifier: "x" }, limitOnly)).body.data.remaining,
        1,
        "once it exists the limit permission is enough",
      );
    });

    await t.test("a deleted namespace answers 410", async (t) => {
      const name = fresh("doomed");
      await limit({ namespace: name, identifier: "x" });
      await h.app.services.ratelimit.deleteNamespace(WORKSPACE, name);
      assertError(t, await limit({ namespace: name, identifier: "x" }), "err:unkey:data:ratelimit_namespace_gone", new RegExp(name));
    });

    await t.test("overrides: exact beats wildcard, the longest wildcard wins, and the answer carries the override", async (t) => {
      const namespace = fresh("tiers");
      await limit({ namespace, identifier: "warm-up" });
      const set = async (identifier: string, overrideLimit: number, duration = DURATION) =>
        (await h.call("ratelimit.setOverride", { namespace, identifier, limit: overrideLimit, duration })).body.data.overrideId as string;
      const everyone = await set("*", 1);
      const customers = await set("customer:*", 5);
      const vip = await set("customer:vip:*", 50, 2 * DURATION);
      const alice = await set("customer:vip:alice", 7);
      t.same((await limit({ namespace, identifier: "customer:vip:alice" })).body.data, {
        limit: 7,
        remaining: 6,
        reset: WINDOW_START + DURATION,
        success: true,
        overrideId: alice,
      });
      t.same(
        (await limit({ namespace, identifier: "customer:vip:bob" })).body.data,
        { limit: 50, remaining: 49, reset: WINDOW_START + 2 * DURATION, success: true, overrideId: vip },
        "the override's duration applies too",
      );
      t.same((await limit({ namespace, identifier: "customer:carol" })).body.data.overrideId, customers);
      t.same((await limit({ namespace, identifier: "anonymous" })).body.data, {
        limit: 1,
        remaining: 0,
        reset: WINDOW_START + DURATION,
        success: true,
        overrideId: everyone,
      });
    });

    await t.test("an override with limit 0 blocks every request, without failing", async (t) => {
      const namespace = fresh("blocked");
      await limit({ namespace, identifier: "warm-up" });
      const overrideId = (await h.call("ratelimit.setOverride", { namespace, identifier: "mallory", limit: 0, duration: DURATION })).body
        .data.overrideId;
      for (const cost of [1, 0]) {
        const result = await limit({ namespace, identifier: "mallory", cost });
        t.equal(result.status, 200);
        t.same(result.body.data, { limit: 0, remaining: 0, reset: WINDOW_START + DURATION, success: false, overrideId });
      }
    });

    await t.test("rejects invalid bodies with located messages (limit below 1 is 400 at body.limit)", async (t) => {
      const valid = { namespace: "api", identifier: "x", limit: 3, duration: DURATION };
      assertInvalidAt(t, await h.call("ratelimit.limit", { ...valid, limit: 0 }), "body.limit", "must be greater than or equal to 1");
      assertInvalidAt(
        t,
        await h.call("ratelimit.limit", { ...valid, limit: 1_000_001 }),
        "body.limit",
        "must be less than or equal to 1000000",
      );
      assertInvalidAt(t, await h.call("ratelimit.limit", { ...valid, limit: "3" }), "body.limit", "must be an integer");
      assertInvalidAt(t, await h.call("ratelimit.limit", { ...valid, limit: 2.5 }), "body.limit", "must be an integer");
      assertInvalidAt(
        t,
        await h.call("ratelimit.limit", { ...valid, duration: 999 }),
        "body.duration",
        "must be greater than or equal to 1000",
      );
      assertInvalidAt(
        t,
        await h.call("ratelimit.limit", { ...valid, duration: 2_592_000_001 }),
        "body.duration",
        "must be less than or equal to 2592000000",
      );
      assertInvalidAt(t, await h.call("ratelimit.limit", { ...valid, cost: -1 }), "body.cost", "must be greater than or equal to 0");
      assertInvalidAt(t, await h.call("ratelimit.limit", { ...valid, cost: 1_001 }), "body.cost", "must be less than or equal to 1000");
      assertInvalidAt(
        t,
        await h.call("ratelimit.limit", { ...valid, namespace: "" }),
        "body.namespace",
        "must be at least 1 character long",
      );
      assertInvalidAt(
        t,
        await h.call("ratelimit.limit", { ...valid, identifier: "x".repeat(513) }),
        "body.identifier",
        "must be at most 512 characters long",
      );
      assertInvalidAt(
        t,
        await h.call("ratelimit.limit", { identifier: "x", limit: 3, duration: DURATION }),
        "body.namespace",
        "is required",
      );
      assertInvalidAt(
        t,
        await h.call("ratelimit.limit", { namespace: "api", limit: 3, duration: DURATION }),
        "body.identifier",
        "is required",
      );
      assertInvalidAt(
        t,
        await h.call("ratelimit.limit", { namespace: "api", identifier: "x", duration: DURATION }),
        "body.limit",
        "is required",
      );
      assertInvalidAt(t, await h.call("ratelimit.limit", { namespace: "api", identifier: "x", limit: 3 }), "body.duration", "is required");
      assertInvalidAt(t, await h.call("ratelimit.limit", { ...valid, async: true }), "body.async", "is not a known field");
      assertInvalidAt(t, await h.call("ratelimits.limit", { ...valid, limit: 0 }), "body.limit", "must be greater than or equal to 1");
    });

    await checkUnauthenticated(t, h, "ratelimit.limit", { namespace: "api", identifier: "x", limit: 3, duration: DURATION });
    await limit({ namespace: "guarded", identifier: "x" });
    const guarded = await namespaceId(h, "guarded");
    await checkPermissions(
      t,
      h,
      "ratelimit.limit",
      () => ({ namespace: "guarded", identifier: fresh("p"), limit: 3, duration: DURATION }),
      {
        missing: ["ratelimit.*.limit", `ratelimit.${guarded}.limit`],
        accepted: [["ratelimit.*.limit"], [`ratelimit.${guarded}.limit`], ["ratelimit.*"]],
      },
    );

    await t.test("a limit permission for another namespace does not grant this one", async (t) => {
      const rootKey = await h.rootKey(["ratelimit.rlns_someothernamespace.limit"]);
      assertError(t, await limit({ namespace: "guarded", identifier: "x" }, rootKey), "err:unkey:authorization:insufficient_permissions");
    });
  });
}
