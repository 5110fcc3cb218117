import { RatelimitOverride$inboundSchema } from "@unkey/api/models/components";
import t from "tap";
import { NAMESPACE_FRESH_MS } from "../../../src/domain/ratelimit/namespace-directory.js";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../../helpers/assertions.js";
import { ManualClock } from "../../helpers/clock.js";
import { harness, OTHER_ROOT_KEY, STORAGE_KINDS, WORKSPACE } from "../../helpers/harness.js";
import { REDIS_URL, uniquePrefix } from "../../helpers/redis.js";

const DURATION = 60_000;

/**
 * The properties of `RatelimitOverride` in the official OpenAPI document (unkeyed/unkey
 * svc/api/openapi/openapi-generated.yaml, `additionalProperties: false`), sorted.
 */
const OFFICIAL_OVERRIDE_FIELDS = ["duration", "identifier", "limit", "overrideId"];

t.test("the official override fields are the ones the SDK's RatelimitOverride model reads", async (t) => {
  const model = RatelimitOverride$inboundSchema as unknown as { shape: Record<string, unknown> };
  t.same(Object.keys(model.shape).sort(), OFFICIAL_OVERRIDE_FIELDS);
});

for (const storage of STORAGE_KINDS) {
  t.test(`ratelimit override procedures on ${storage} stores`, async (t) => {
    const clock = new ManualClock();
    const h = await harness(t, { storage, clock });
    let serial = 0;
    const fresh = (label: string) => `${label}-${++serial}`;
    /** A namespace that exists (created by a limit call), and its id. */
    const namespace = async () => {
      const name = fresh("ns");
      await h.call("ratelimit.limit", { namespace: name, identifier: "warm-up", limit: 1, duration: DURATION });
      return { name, id: (await h.app.stores.ratelimitNamespaces.findNamespaceByName(WORKSPACE, name))?.id as string };
    };
    const set = (body: Record<string, unknown>, rootKey?: string) =>
      h.call("ratelimit.setOverride", { limit: 10, duration: DURATION, ...body }, rootKey === undefined ? {} : { rootKey });

    await t.test("setOverride answers an rlor_ id, getOverride reads the override back", async (t) => {
      const ns = await namespace();
      const created = await set({ namespace: ns.name, identifier: "alice", limit: 25 });
      t.equal(created.status, 200);
      t.same(Object.keys(created.body.data), ["overrideId"]);
      t.match(created.body.data.overrideId, /^rlor_[1-9A-HJ-NP-Za-km-z]+$/);
      const read = await h.call("ratelimit.getOverride", { namespace: ns.name, identifier: "alice" });
      t.equal(read.status, 200);
      t.same(read.body.data, { overrideId: created.body.data.overrideId, identifier: "alice", limit: 25, duration: DURATION });
      t.same(
        Object.keys(read.body.data).sort(),
        OFFICIAL_OVERRIDE_FIELDS,
        "exactly the official record's fields: no namespaceId, no createdAt",
      );
      t.same(
        (await h.call("ratelimits.getOverride", { namespace: ns.id, identifier: "alice" })).body.data,
        read.body.data,
        "by namespace id, and under ratelimits.",
      );
    });

    await t.test("setOverride is an upsert that keeps the override id", async (t) => {
      const ns = await namespace();
      const first = (await set({ namespace: ns.name, identifier: "alice", limit: 25 })).body.data.overrideId;
      clock.advance(1_000);
      const second = (await h.call("ratelimits.setOverride", { namespace: ns.id, identifier: "alice", limit: 0, duration: 2_000 })).body
        .data.overrideId;
      t.equal(second, first);
      const read = (await h.call("ratelimit.getOverride", { namespace: ns.name, identifier: "alice" })).body.data;
      t.same([read.limit, read.duration], [0, 2_000], "new limit and duration");
      const stored = await h.app.stores.ratelimitNamespaces.getOverride(WORKSPACE, ns.id, "alice");
      t.equal(stored?.createdAt, clock.now() - 1_000, "the store keeps the first createdAt");
    });

    await t.test("setOverride does not create namespaces: unknown or deleted ones are 404", async (t) => {
      const name = fresh("missing");
      assertError(t, await set({ namespace: name, identifier: "alice" }), "err:unkey:data:ratelimit_namespace_not_found", new RegExp(name));
      t.equal(await h.app.stores.ratelimitNamespaces.findNamespaceByName(WORKSPACE, name), null);
      const ns = await namespace();
      await h.app.services.ratelimit.deleteNamespace(WORKSPACE, ns.name);
      assertError(t, await set({ namespace: ns.name, identifier: "alice" }), "err:unkey:data:ratelimit_namespace_not_found");
      assertError(t, await h.call("ratelimit.listOverrides", { namespace: ns.id }), "err:unkey:data:ratelimit_namespace_not_found");
    });

    await t.test("another workspace's namespace is 404, by name and by id", async (t) => {
      const ns = await namespace();
      await set({ namespace: ns.name, identifier: "alice" });
      for (const target of [ns.name, ns.id]) {
        assertError(
          t,
          await h.call("ratelimit.getOverride", { namespace: target, identifier: "alice" }, { rootKey: OTHER_ROOT_KEY }),
          "err:unkey:data:ratelimit_namespace_not_found",
        );
        assertError(
          t,
          await h.call(
            "ratelimit.setOverride",
            { namespace: target, identifier: "alice", limit: 1, duration: DURATION },
            { rootKey: OTHER_ROOT_KEY },
          ),
          "err:unkey:data:ratelimit_namespace_not_found",
        );
      }
    });

    await t.test("getOverride and deleteOverride address the stored identifier or pattern exactly", async (t) => {
      const ns = await namespace();
      await set({ namespace: ns.name, identifier: "*@example.com" });
      assertError(
        t,
        await h.call("ratelimit.getOverride", { namespace: ns.name, identifier: "bob@example.com" }),
        "err:unkey:data:ratelimit_override_not_found",
        /bob@example\.com/,
      );
      assertError(
        t,
        await h.call("ratelimit.deleteOverride", { namespace: ns.name, identifier: "bob@example.com" }),
        "err:unkey:data:ratelimit_override_not_found",
      );
      t.equal((await h.call("ratelimit.getOverride", { namespace: ns.name, identifier: "*@example.com" })).status, 200);
    });

    await t.test("deleteOverride answers {}; the override is gone and no longer applies", async (t) => {
      const ns = await namespace();
      await set({ namespace: ns.name, identifier: "alice", limit: 100 });
      t.equal(
        (await h.call("ratelimit.limit", { namespace: ns.name, identifier: "alice", limit: 1, duration: DURATION })).body.data.limit,
        100,
      );
      const deleted = await h.call("ratelimits.deleteOverride", { namespace: ns.name, identifier: "alice" });
      t.equal(deleted.status, 200);
      t.same(deleted.body.data, {});
      assertError(
        t,
        await h.call("ratelimit.getOverride", { namespace: ns.name, identifier: "alice" }),
        "err:unkey:data:ratelimit_override_not_found",
      );
      assertError(
        t,
        await h.call("ratelimit.deleteOverride", { namespace: ns.name, identifier: "alice" }),
        "err:unkey:data:ratelimit_override_not_found",
      );
      const after = await h.call("ratelimit.limit", { namespace: ns.name, identifier: "alice", limit: 1, duration: DURATION });
      t.same(
        [after.body.data.limit, after.body.data.overrideId],
        [1, undefined],
        "the request's own limit applies at once on this instance",
      );
    });

    await t.test("listOverrides pages 10 at a time by default, with an inclusive cursor, and up to 100", async (t) => {
      const ns = await namespace();
      const ids: string[] = [];
      for (let i = 0; i < 23; i++) {
        clock.advance(1_000); // ids are time-ordered by the second
        ids.push((await set({ namespace: ns.name, identifier: `user-${i}` })).body.data.overrideId);
      }
      const first = await h.call("ratelimit.listOverrides", { namespace: ns.name });
      t.equal(first.status, 200);
      t.same(Object.keys(first.body), ["meta", "data", "pagination"]);
      t.same(
        first.body.data.overrides.map((override: { overrideId: string }) => override.overrideId),
        ids.slice(0, 10),
      );
      t.same(first.body.pagination, { cursor: ids[10], hasMore: true });
      t.same(first.body.data.overrides[0], { overrideId: ids[0], identifier: "user-0", limit: 10, duration: DURATION });
      for (const override of first.body.data.overrides)
        t.same(Object.keys(override).sort(), OFFICIAL_OVERRIDE_FIELDS, `only the official fields in ${override.overrideId}`);
      const second = await h.call("ratelimits.listOverrides", { namespace: ns.id, cursor: first.body.pagination.cursor, limit: 10 });
      t.same(
        second.body.data.overrides.map((override: { overrideId: string }) => override.overrideId),
        ids.slice(10, 20),
      );
      const last = await h.call("ratelimit.listOverrides", { namespace: ns.name, cursor: second.body.pagination.cursor });
      t.same(
        last.body.data.overrides.map((override: { overrideId: string }) => override.overrideId),
        ids.slice(20),
      );
      t.same(last.body.pagination, { hasMore: false }, "no cursor on the last page");
      const all = await h.call("ratelimit.listOverrides", { namespace: ns.name, limit: 100 });
      t.same([all.body.data.overrides.length, all.body.pagination.hasMore], [23, false]);
    });

    await t.test("namespaces and identifiers of up to 512 characters are taken, as the official schemas allow", async (t) => {
      const name = "n".repeat(512);
      const identifier = "i".repeat(512);
      t.equal((await h.call("ratelimit.limit", { namespace: name, identifier, limit: 1, duration: DURATION })).status, 200);
      const created = await set({ namespace: name, identifier, limit: 7 });
      t.equal(created.status, 200);
      t.same((await h.call("ratelimit.getOverride", { namespace: name, identifier })).body.data, {
        overrideId: created.body.data.overrideId,
        identifier,
        limit: 7,
        duration: DURATION,
      });
      t.equal(
        (await h.call("ratelimit.limit", { namespace: name, identifier, limit: 1, duration: DURATION })).body.data.limit,
        7,
        "the override applies",
      );
      t.equal((await h.call("ratelimit.listOverrides", { namespace: name })).body.data.overrides.length, 1);
      t.same((await h.call("ratelimit.deleteOverride", { namespace: name, identifier })).body.data, {});
    });

    await t.test("listOverrides of a namespace without overrides is an empty list", async (t) => {
      const ns = await namespace();
      const result = await h.call("ratelimit.listOverrides", { namespace: ns.name });
      t.same(result.body.data, { overrides: [] });
      t.same(result.body.pagination, { hasMore: false });
    });

    await t.test("rejects invalid bodies with located messages", async (t) => {
      const valid = { namespace: "ns", identifier: "alice", limit: 1, duration: DURATION };
      assertInvalidAt(
        t,
        await h.call("ratelimit.setOverride", { ...valid, limit: -1 }),
        "body.limit",
        "must be greater than or equal to 0",
      );
      assertInvalidAt(
        t,
        await h.call("ratelimit.setOverride", { ...valid, limit: 1_000_001 }),
        "body.limit",
        "must be less than or equal to 1000000",
      );
      assertInvalidAt(
        t,
        await h.call("ratelimit.setOverride", { ...valid, duration: 999 }),
        "body.duration",
        "must be greater than or equal to 1000",
      );
      assertInvalidAt(
        t,
        await h.call("ratelimit.setOverride", { ...valid, identifier: "" }),
        "body.identifier",
        "must be at least 1 character long",
      );
      assertInvalidAt(
        t,
        await h.call("ratelimit.setOverride", { namespace: "ns", identifier: "alice", limit: 1 }),
        "body.duration",
        "is required",
      );
      assertInvalidAt(t, await h.call("ratelimit.getOverride", { namespace: "ns" }), "body.identifier", "is required");
      for (const [procedure, body] of [
        ["ratelimit.setOverride", valid],
        ["ratelimit.getOverride", { namespace: "ns", identifier: "alice" }],
        ["ratelimit.deleteOverride", { namespace: "ns", identifier: "alice" }],
      ] as const) {
        assertInvalidAt(
          t,
          await h.call(procedure, { ...body, namespace: "n".repeat(513) }),
          "body.namespace",
          "must be at most 512 characters long",
        );
        assertInvalidAt(
          t,
          await h.call(procedure, { ...body, identifier: "i".repeat(513) }),
          "body.identifier",
          "must be at most 512 characters long",
        );
      }
      assertInvalidAt(
        t,
        await h.call("ratelimit.listOverrides", { namespace: "n".repeat(513) }),
        "body.namespace",
        "must be at most 512 characters long",
      );
      assertInvalidAt(
        t,
        await h.call("ratelimit.deleteOverride", { namespace: "ns", identifier: "alice", limit: 1 }),
        "body.limit",
        "is not a known field",
      );
      assertInvalidAt(
        t,
        await h.call("ratelimit.listOverrides", { namespace: "ns", limit: 0 }),
        "body.limit",
        "must be greater than or equal to 1",
      );
      assertInvalidAt(
        t,
        await h.call("ratelimit.listOverrides", { namespace: "ns", limit: 101 }),
        "body.limit",
        "must be less than or equal to 100",
      );
      assertInvalidAt(
        t,
        await h.call("ratelimit.listOverrides", { namespace: "ns", cursor: "" }),
        "body.cursor",
        "must be at least 1 character long",
      );
      assertInvalidAt(t, await h.call("ratelimit.listOverrides", {}), "body.namespace", "is required");
    });

    const ns = await namespace();
    await set({ namespace: ns.name, identifier: "existing" });
    for (const [procedure, body] of [
      ["ratelimit.setOverride", { namespace: ns.name, identifier: "x", limit: 1, duration: DURATION }],
      ["ratelimit.getOverride", { namespace: ns.name, identifier: "existing" }],
      ["ratelimit.listOverrides", { namespace: ns.name }],
      ["ratelimit.deleteOverride", { namespace: ns.name, identifier: "existing" }],
    ] as const) {
      await checkUnauthenticated(t, h, procedure, body);
    }
    await checkPermissions(
      t,
      h,
      "ratelimit.setOverride",
      () => ({ namespace: ns.name, identifier: fresh("who"), limit: 1, duration: DURATION }),
      {
        missing: ["ratelimit.*.set_override", `ratelimit.${ns.id}.set_override`],
        accepted: [["ratelimit.*.set_override"], [`ratelimit.${ns.id}.set_override`], ["ratelimit.*"]],
      },
    );
    await checkPermissions(t, h, "ratelimit.getOverride", () => ({ namespace: ns.name, identifier: "existing" }), {
      missing: ["ratelimit.*.read_override", `ratelimit.${ns.id}.read_override`],
      accepted: [["ratelimit.*.read_override"], [`ratelimit.${ns.id}.read_override`]],
    });
    await checkPermissions(t, h, "ratelimit.listOverrides", () => ({ namespace: ns.name }), {
      missing: ["ratelimit.*.read_override", `ratelimit.${ns.id}.read_override`],
      accepted: [["ratelimit.*.read_override"], [`ratelimit.${ns.id}.read_override`]],
    });
    await checkPermissions(
      t,
      h,
      "ratelimit.deleteOverride",
      async () => {
        const identifier = fresh("victim");
        await set({ namespace: ns.name, identifier });
        return { namespace: ns.name, identifier };
      },
      {
        missing: ["ratelimit.*.delete_override", `ratelimit.${ns.id}.delete_override`],
        accepted: [["ratelimit.*.delete_override"], [`ratelimit.${ns.id}.delete_override`]],
      },
    );

    await t.test("reading overrides needs read_override, not set_override", async (t) => {
      const setter = await h.rootKey(["ratelimit.*.set_override"]);
      assertError(
        t,
        await h.call("ratelimit.getOverride", { namespace: ns.name, identifier: "existing" }, { rootKey: setter }),
        "err:unkey:authorization:insufficient_permissions",
        /read_override/,
      );
    });
  });
}

t.test(`an override set or deleted on one instance applies on another sharing Redis within ${NAMESPACE_FRESH_MS} ms`, async (t) => {
  const clock = new ManualClock();
  const redis = { storage: { redis: { url: REDIS_URL, prefix: uniquePrefix(t, "propagation") } } };
  const a = await harness(t, { storage: "redis", clock, config: redis });
  const b = await harness(t, { storage: "redis", clock, config: redis });
  const limitOn = async (instance: typeof a) =>
    (await instance.call("ratelimit.limit", { namespace: "shared", identifier: "alice", limit: 1, duration: DURATION })).body.data;

  t.same((await limitOn(a)).limit, 1);
  t.same((await limitOn(b)).limit, 1, "b knows the namespace and that alice has no override");
  const overrideId = (await a.call("ratelimit.setOverride", { namespace: "shared", identifier: "alice", limit: 50, duration: DURATION }))
    .body.data.overrideId;
  const onA = await limitOn(a);
  t.same([onA.limit, onA.remaining, onA.overrideId], [50, 49, overrideId], "at once where it was set");
  clock.advance(NAMESPACE_FRESH_MS);
  t.same((await limitOn(b)).overrideId, overrideId, "on the other instance after the fresh window");

  await b.call("ratelimit.deleteOverride", { namespace: "shared", identifier: "alice" });
  clock.advance(NAMESPACE_FRESH_MS);
  t.same((await limitOn(a)).limit, 1, "a deletion too");
});
