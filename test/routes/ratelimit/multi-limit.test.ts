import t from "tap";
import { assertError, assertInvalidAt, checkUnauthenticated } from "../../helpers/assertions.js";
import { ManualClock } from "../../helpers/clock.js";
import { harness, STORAGE_KINDS, WORKSPACE } from "../../helpers/harness.js";

const DURATION = 60_000;
const WINDOW_START = 40_000_000 * DURATION;

for (const storage of STORAGE_KINDS) {
  t.test(`ratelimit.multiLimit on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage, clock: new ManualClock(WINDOW_START) });
    let serial = 0;
    const fresh = (label: string) => `${label}-${++serial}`;
    const item = (namespace: string, identifier: string, limit: number, cost?: number) => ({
      namespace,
      identifier,
      limit,
      duration: DURATION,
      ...(cost === undefined ? {} : { cost }),
    });
    /** Remaining of each check, read with cost 0 (which consumes nothing). */
    const peek = async (items: ReturnType<typeof item>[]) =>
      (
        await h.call(
          "ratelimit.multiLimit",
          items.map((one) => ({ ...one, cost: 0 })),
        )
      ).body.data.limits.map((one: { remaining: number }) => one.remaining);

    await t.test("when every check passes each one is consumed, and each answer names its check", async (t) => {
      const user = fresh("user");
      const result = await h.call("ratelimit.multiLimit", [item("requests", user, 10), item("tokens", user, 1_000, 250)]);
      t.equal(result.status, 200);
      t.same(result.body.data, {
        passed: true,
        limits: [
          { namespace: "requests", identifier: user, limit: 10, remaining: 9, reset: WINDOW_START + DURATION, passed: true },
          { namespace: "tokens", identifier: user, limit: 1_000, remaining: 750, reset: WINDOW_START + DURATION, passed: true },
        ],
      });
      t.equal(
        (await h.call("ratelimits.multiLimit", [item("requests", user, 10)])).body.data.limits[0].remaining,
        8,
        "ratelimits.multiLimit too",
      );
    });

    await t.test("when the last check fails no counter moves, and the others report their room as if nothing was taken", async (t) => {
      const user = fresh("user");
      await h.call("ratelimit.limit", item("daily", user, 1));
      const batch = [item("requests", user, 10), item("tokens", user, 1_000, 250), item("daily", user, 1)];
      const result = await h.call("ratelimit.multiLimit", batch);
      t.same(result.body.data, {
        passed: false,
        limits: [
          { namespace: "requests", identifier: user, limit: 10, remaining: 10, reset: WINDOW_START + DURATION, passed: true },
          { namespace: "tokens", identifier: user, limit: 1_000, remaining: 1_000, reset: WINDOW_START + DURATION, passed: true },
          { namespace: "daily", identifier: user, limit: 1, remaining: 0, reset: WINDOW_START + DURATION, passed: false },
        ],
      });
      t.same(await peek(batch), [10, 1_000, 0], "nothing was consumed");
    });

    await t.test("overrides apply per check", async (t) => {
      const user = fresh("user");
      await h.call("ratelimit.limit", item("plans", "warm-up", 1));
      const overrideId = (await h.call("ratelimit.setOverride", { namespace: "plans", identifier: user, limit: 100, duration: DURATION }))
        .body.data.overrideId;
      const result = await h.call("ratelimit.multiLimit", [item("plans", user, 1), item("plans", "someone-else", 1)]);
      t.same(
        result.body.data.limits.map((one: { limit: number; overrideId?: string }) => [one.limit, one.overrideId]),
        [
          [100, overrideId],
          [1, undefined],
        ],
      );
    });

    await t.test("needs the limit permission for every namespace of the batch; the 403 names the missing ones", async (t) => {
      const user = fresh("user");
      await h.call("ratelimit.multiLimit", [item("alpha", user, 5), item("beta", user, 5)]);
      const ids = await Promise.all(
        ["alpha", "beta"].map(async (name) => (await h.app.stores.ratelimitNamespaces.findNamespaceByName(WORKSPACE, name))?.id as string),
      );
      const alphaOnly = await h.rootKey([`ratelimit.${ids[0]}.limit`]);
      const denied = await h.call("ratelimit.multiLimit", [item("alpha", user, 5), item("beta", user, 5)], { rootKey: alphaOnly });
      assertError(t, denied, "err:unkey:authorization:insufficient_permissions", new RegExp(`ratelimit\\.${ids[1]}\\.limit`));
      t.notMatch(denied.body.error.detail, `ratelimit.${ids[0]}.limit`, "only what is missing is named");
      t.same(await peek([item("alpha", user, 5)]), [4], "a 403 consumes nothing");
      const both = await h.rootKey([`ratelimit.${ids[0]}.limit`, `ratelimit.${ids[1]}.limit`]);
      t.equal((await h.call("ratelimit.multiLimit", [item("alpha", user, 5), item("beta", user, 5)], { rootKey: both })).status, 200);
      const wildcard = await h.rootKey(["ratelimit.*.limit"]);
      t.equal((await h.call("ratelimit.multiLimit", [item("alpha", user, 5), item("beta", user, 5)], { rootKey: wildcard })).status, 200);
    });

    await t.test("unknown namespaces are created only with create_namespace, and a 403 creates none of them", async (t) => {
      const [first, second] = [fresh("fresh-a"), fresh("fresh-b")];
      const limitOnly = await h.rootKey(["ratelimit.*.limit"]);
      const denied = await h.call("ratelimit.multiLimit", [item(first, "x", 5), item(second, "x", 5)], { rootKey: limitOnly });
      assertError(t, denied, "err:unkey:authorization:insufficient_permissions", /create_namespace/);
      t.match(denied.body.error.detail, `'${first}', '${second}'`);
      for (const name of [first, second]) t.equal(await h.app.stores.ratelimitNamespaces.findNamespaceByName(WORKSPACE, name), null);
      const creator = await h.rootKey(["ratelimit.*.limit", "ratelimit.*.create_namespace"]);
      t.equal(
        (await h.call("ratelimit.multiLimit", [item(first, "x", 5), item(second, "x", 5)], { rootKey: creator })).body.data.passed,
        true,
      );
    });

    await t.test("a deleted namespace in the batch is 410 and nothing is consumed; an unknown rlns_ id is 404", async (t) => {
      const user = fresh("user");
      const doomed = fresh("doomed");
      await h.call("ratelimit.multiLimit", [item("kept", user, 5), item(doomed, user, 5)]);
      await h.app.services.ratelimit.deleteNamespace(WORKSPACE, doomed);
      assertError(
        t,
        await h.call("ratelimit.multiLimit", [item("kept", user, 5), item(doomed, user, 5)]),
        "err:unkey:data:ratelimit_namespace_gone",
        new RegExp(doomed),
      );
      assertError(
        t,
        await h.call("ratelimit.multiLimit", [item("kept", user, 5), item("rlns_nothinghere", user, 5)]),
        "err:unkey:data:ratelimit_namespace_not_found",
      );
      t.same(await peek([item("kept", user, 5)]), [4]);
    });

    await t.test("rejects invalid batches with located messages", async (t) => {
      assertInvalidAt(t, await h.call("ratelimit.multiLimit", []), "body", "must contain at least 1 item");
      assertInvalidAt(
        t,
        await h.call(
          "ratelimit.multiLimit",
          Array.from({ length: 101 }, () => item("api", "x", 1)),
        ),
        "body",
        "must contain at most 100 items",
      );
      assertInvalidAt(
        t,
        await h.call("ratelimit.multiLimit", [item("api", "x", 1), item("api", "x", 0)]),
        "body[1].limit",
        "must be greater than or equal to 1",
      );
      assertInvalidAt(
        t,
        await h.call("ratelimit.multiLimit", [{ ...item("api", "x", 1), cost: 1_001 }]),
        "body[0].cost",
        "must be less than or equal to 1000",
      );
      assertInvalidAt(t, await h.call("ratelimit.multiLimit", item("api", "x", 1)), "body", "must be an array");
    });

    await t.test("100 checks in one batch are fine", async (t) => {
      const user = fresh("user");
      const result = await h.call(
        "ratelimit.multiLimit",
        Array.from({ length: 100 }, (_, i) => item("wide", `${user}-${i}`, 1)),
      );
      t.same([result.status, result.body.data.passed, result.body.data.limits.length], [200, true, 100]);
    });

    await checkUnauthenticated(t, h, "ratelimit.multiLimit", [item("api", "x", 1)]);
  });
}
