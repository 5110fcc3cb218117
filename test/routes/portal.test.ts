import t from "tap";
import { assertError, assertInvalidAt, checkPermissions, checkUnauthenticated } from "../helpers/assertions.js";
import { ManualClock } from "../helpers/clock.js";
import { createApi, createKey, getKey } from "../helpers/fixtures.js";
import { type Harness, harness, OTHER_ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

// portal.*: portals as records, one-time codes, sessions, and the customer's own procedures, on both stores.

const HOUR = 3_600_000;

/** A code minted for `externalId` and exchanged: the session's cookie header, ready to send. */
async function session(h: Harness, portal: string, externalId: string, scopes: string[]): Promise<Record<string, string>> {
  const minted = await h.call("portal.createSession", { portal, externalId, scopes });
  if (minted.status !== 200) throw new Error(JSON.stringify(minted.body));
  const code = new URL(minted.body.data.url).searchParams.get("code");
  const exchanged = await h.call("portal.exchangeCode", { code }, { rootKey: null });
  return { cookie: `portal_session=${exchanged.body.data.accessToken}` };
}

for (const storage of STORAGE_KINDS) {
  t.test(`portal procedures on ${storage} stores`, async (t) => {
    const clock = new ManualClock(Date.UTC(2026, 5, 10, 12, 0, 0));
    const h = await harness(t, { storage, clock });
    const apiId = await createApi(h, "billing");
    const otherApi = await createApi(h, "other");

    await t.test("a portal is created, read by id or slug, listed, updated and deleted", async (t) => {
      const created = await h.call("portal.createPortal", {
        slug: "acme-keys",
        displayName: "Acme",
        mapping: { type: "keyspace", id: apiId },
        primaryColor: "#112233",
        keyDefaults: { prefix: "acme", credits: { remaining: 50 } },
      });
      t.equal(created.status, 200);
      const portalId = created.body.data.portalId;
      t.match(portalId, /^pc_/);
      const read = await h.call("portal.getPortal", { portal: "acme-keys" });
      t.same(read.body.data, {
        portalId,
        slug: "acme-keys",
        displayName: "Acme",
        mapping: { type: "keyspace", id: apiId },
        enabled: true,
        primaryColor: "#112233",
        keyDefaults: { prefix: "acme", credits: { remaining: 50 } },
        createdAt: clock.now(),
      });
      t.equal((await h.call("portal.getPortal", { portal: portalId })).body.data.slug, "acme-keys");
      t.same(
        (await h.call("portal.listPortals", {})).body.data.portals.map((p: any) => p.portalId),
        [portalId],
      );
      const updated = await h.call("portal.updatePortal", {
        portal: portalId,
        displayName: "Acme Inc",
        primaryColor: null,
        logoUrl: "https://acme.test/logo.png",
      });
      t.equal(updated.body.data.displayName, "Acme Inc");
      t.notOk("primaryColor" in updated.body.data, "null clears");
      t.equal(updated.body.data.logoUrl, "https://acme.test/logo.png");
      t.equal((await h.call("portal.deletePortal", { portal: portalId })).status, 200);
      assertError(t, await h.call("portal.getPortal", { portal: portalId }), "err:unkey:data:portal_not_found");
      assertError(t, await h.call("portal.deletePortal", { portal: portalId }), "err:unkey:data:portal_not_found");
    });

    await t.test("one portal per mapping and per slug (409); a mapping must exist (404); bad bodies 400", async (t) => {
      const base = { displayName: "P", mapping: { type: "keyspace", id: otherApi } };
      t.equal((await h.call("portal.createPortal", { ...base, slug: "first" })).status, 200);
      assertError(
        t,
        await h.call("portal.createPortal", { ...base, slug: "second" }),
        "err:keygate:data:portal_conflict",
        /one portal per mapping/,
      );
      assertError(
        t,
        await h.call("portal.createPortal", { ...base, slug: "first", mapping: { type: "keyspace", id: apiId } }),
        "err:keygate:data:portal_conflict",
        /slug/,
      );
      assertError(
        t,
        await h.call("portal.createPortal", { ...base, slug: "third", mapping: { type: "keyspace", id: "api_missing" } }),
        "err:unkey:data:api_not_found",
      );
      assertError(
        t,
        await h.call("portal.createPortal", { ...base, slug: "fourth", mapping: { type: "route", id: "rt_missing" } }),
        "err:keygate:data:route_not_found",
      );
      assertInvalidAt(t, await h.call("portal.createPortal", { ...base, slug: "_ui" }), "body.slug");
      assertInvalidAt(t, await h.call("portal.createPortal", { ...base, slug: "fine", primaryColor: "red" }), "body.primaryColor");
      for (const logoUrl of ["javascript:alert(1)", "not a url at all", "https://x.test/a b"])
        assertInvalidAt(t, await h.call("portal.createPortal", { ...base, slug: "fine", logoUrl }), "body.logoUrl");
      assertInvalidAt(t, await h.call("portal.updatePortal", { portal: "first", logoUrl: "ftp://x.test/logo" }), "body.logoUrl");
      assertInvalidAt(
        t,
        await h.call("portal.createSession", {
          portal: "first",
          externalId: "u",
          scopes: ["keys:read"],
          returnUrl: "javascript:void(0)//",
        }),
        "body.returnUrl",
      );
      assertError(t, await h.call("portal.getPortal", { portal: "first" }, { rootKey: OTHER_ROOT_KEY }), "err:unkey:data:portal_not_found");
      await h.call("portal.deletePortal", { portal: "first" });
    });

    await checkUnauthenticated(t, h, "portal.createPortal", { slug: "x-y-z", displayName: "x", mapping: { type: "keyspace", id: apiId } });
    let counter = 0;
    await checkPermissions(
      t,
      h,
      "portal.createPortal",
      async () => ({
        slug: `perm-${++counter}`,
        displayName: "x",
        mapping: { type: "keyspace", id: await createApi(h, `perm-${counter}`) },
      }),
      { missing: ["portal.*.create_portal"], accepted: [["portal.*.create_portal"]] },
    );

    await t.test("read, update and delete ask for the portal's own permission or the wildcard", async (t) => {
      const { portalId } = (
        await h.call("portal.createPortal", {
          slug: "guarded",
          displayName: "G",
          mapping: { type: "keyspace", id: await createApi(h, "ggg") },
        })
      ).body.data;
      const reader = await h.rootKey([`portal.${portalId}.read_portal`]);
      t.equal((await h.call("portal.getPortal", { portal: portalId }, { rootKey: reader })).status, 200);
      assertError(
        t,
        await h.call("portal.updatePortal", { portal: portalId, enabled: false }, { rootKey: reader }),
        "err:unkey:authorization:insufficient_permissions",
        /update_portal/,
      );
      assertError(
        t,
        await h.call("portal.deletePortal", { portal: portalId }, { rootKey: reader }),
        "err:unkey:authorization:insufficient_permissions",
      );
      t.same(
        (await h.call("portal.listPortals", {}, { rootKey: reader })).body.data.portals.map((p: any) => p.portalId),
        [portalId],
      );
      const deleter = await h.rootKey(["portal.*.delete_portal"]);
      t.equal((await h.call("portal.deletePortal", { portal: portalId }, { rootKey: deleter })).status, 200);
    });

    const { portalId } = (
      await h.call("portal.createPortal", {
        slug: "customers",
        displayName: "Customers",
        mapping: { type: "keyspace", id: apiId },
        keyDefaults: { prefix: "cust", byteLength: 20, credits: { remaining: 7 }, ratelimits: [{ name: "req", limit: 5, duration: 1000 }] },
      })
    ).body.data;

    await t.test("createSession: a URL with a one-time code, no-store; masked 404; scopes need the root key's rights", async (t) => {
      const minted = await h.call("portal.createSession", {
        portal: "customers",
        externalId: "user_1",
        scopes: ["keys:read"],
        returnUrl: "https://app.test/settings",
      });
      t.equal(minted.status, 200);
      t.equal(minted.headers["cache-control"], "no-store");
      t.match(minted.body.data.id, /^ps_/);
      t.match(minted.body.data.url, /^http:\/\/localhost(:\d+)?\/portal\/customers\?code=pst_[1-9A-HJ-NP-Za-km-z]+$/);

      const unrelated = await h.rootKey([`api.${apiId}.read_key`, `api.${apiId}.read_api`]);
      const masked = await h.call(
        "portal.createSession",
        { portal: "customers", externalId: "u", scopes: ["keys:read"] },
        { rootKey: unrelated },
      );
      assertError(t, masked, "err:unkey:data:portal_not_found");
      t.same(
        masked.body.error.detail,
        (
          await h.call("portal.createSession", { portal: "nothing-here", externalId: "u", scopes: ["keys:read"] })
        ).body.error.detail.replace("nothing-here", "customers"),
        "the same answer as a missing portal",
      );

      const minter = await h.rootKey([`portal.${portalId}.create_portal_session`, `api.${apiId}.read_key`, `api.${apiId}.read_api`]);
      t.equal(
        (await h.call("portal.createSession", { portal: portalId, externalId: "u", scopes: ["keys:read"] }, { rootKey: minter })).status,
        200,
      );
      for (const [scope, missing] of [
        ["keys:reroll", "create_key"],
        ["keys:create", "create_key"],
        ["analytics:read", "read_analytics"],
      ] as const)
        assertError(
          t,
          await h.call("portal.createSession", { portal: portalId, externalId: "u", scopes: [scope] }, { rootKey: minter }),
          "err:unkey:authorization:insufficient_permissions",
          new RegExp(missing),
        );
      assertInvalidAt(
        t,
        await h.call("portal.createSession", { portal: portalId, externalId: "u", scopes: ["keys:delete"] }),
        "body.scopes[0]",
      );
      assertInvalidAt(t, await h.call("portal.createSession", { portal: portalId, externalId: "u", scopes: [] }), "body.scopes");
    });

    await t.test("exchangeCode: once, within 15 minutes; a disabled portal mints nothing", async (t) => {
      const minted = await h.call("portal.createSession", { portal: "customers", externalId: "user_1", scopes: ["keys:read"] });
      const code = new URL(minted.body.data.url).searchParams.get("code");
      const first = await h.call("portal.exchangeCode", { code }, { rootKey: null });
      t.equal(first.status, 200);
      t.equal(first.headers["cache-control"], "no-store");
      t.match(first.body.data.accessToken, /^pat_/);
      t.equal(first.body.data.expiresAt, clock.now() + 24 * HOUR);
      assertError(
        t,
        await h.call("portal.exchangeCode", { code }, { rootKey: null }),
        "err:unkey:authentication:portal_session_not_found",
        /already been used/,
      );
      assertError(
        t,
        await h.call("portal.exchangeCode", { code: "pst_nonsense" }, { rootKey: null }),
        "err:unkey:authentication:portal_session_not_found",
        /unknown or has expired/,
      );

      const late = new URL(
        (await h.call("portal.createSession", { portal: "customers", externalId: "user_1", scopes: ["keys:read"] })).body.data.url,
      ).searchParams.get("code");
      clock.advance(15 * 60_000);
      assertError(
        t,
        await h.call("portal.exchangeCode", { code: late }, { rootKey: null }),
        "err:unkey:authentication:portal_session_not_found",
        /expired/,
      );

      await h.call("portal.updatePortal", { portal: "customers", enabled: false });
      assertError(
        t,
        await h.call("portal.createSession", { portal: "customers", externalId: "u", scopes: ["keys:read"] }),
        "err:unkey:application:precondition_failed",
      );
      await h.call("portal.updatePortal", { portal: "customers", enabled: true });
    });

    await t.test("a session lasts 24 hours, needs no root key and is refused without its cookie", async (t) => {
      const cookie = await session(h, "customers", "user_ttl", ["keys:read"]);
      t.equal((await h.call("portal.listKeys", {}, { rootKey: null, headers: cookie })).status, 200);
      assertError(t, await h.call("portal.listKeys", {}, { rootKey: null }), "err:unkey:authentication:portal_token_missing");
      assertError(t, await h.call("portal.listKeys", {}, {}), "err:unkey:authentication:portal_token_missing", undefined);
      assertError(
        t,
        await h.call("portal.listKeys", {}, { rootKey: null, headers: { cookie: "portal_session=pat_forged" } }),
        "err:unkey:authentication:portal_session_not_found",
      );
      clock.advance(24 * HOUR);
      assertError(
        t,
        await h.call("portal.listKeys", {}, { rootKey: null, headers: cookie }),
        "err:unkey:authentication:portal_session_not_found",
      );
    });

    await t.test("the customer's keys: listed, created with the portal's defaults, rerolled; another customer's key is 404", async (t) => {
      const mine = await createKey(h, apiId, { externalId: "alice", name: "alice-1" });
      const theirs = await createKey(h, apiId, { externalId: "bob" });
      const elsewhere = await createKey(h, otherApi, { externalId: "alice" });
      const cookie = await session(h, "customers", "alice", ["keys:read", "keys:create", "keys:reroll"]);
      const as = { rootKey: null, headers: cookie };

      const listed = await h.call("portal.listKeys", {}, as);
      t.same(
        listed.body.data.map((k: any) => k.keyId),
        [mine.keyId],
        "only alice's keys, only in the portal's API",
      );
      t.same(listed.body.pagination, { hasMore: false });

      const created = await h.call("portal.createKey", { name: "from-portal" }, as);
      t.equal(created.status, 200);
      t.equal(created.headers["cache-control"], "no-store");
      t.match(created.body.data.key, /^cust_/);
      const details = await getKey(h, created.body.data.keyId);
      t.equal(details.identity.externalId, "alice");
      t.same(details.credits, { remaining: 7 });
      t.same(
        details.ratelimits.map((r: any) => [r.name, r.limit]),
        [["req", 5]],
      );
      assertInvalidAt(t, await h.call("portal.createKey", { apiId: otherApi }, as), "body.apiId");

      const page = await h.call("portal.listKeys", { limit: 1 }, as);
      t.equal(page.body.data.length, 1);
      t.equal(page.body.pagination.hasMore, true);
      const rest = await h.call("portal.listKeys", { limit: 1, cursor: page.body.pagination.cursor }, as);
      t.equal(rest.body.data.length, 1);
      t.not(rest.body.data[0].keyId, page.body.data[0].keyId);

      const rerolled = await h.call("portal.rerollKey", { keyId: mine.keyId, expiration: 60_000 }, as);
      t.equal(rerolled.status, 200);
      t.equal((await getKey(h, mine.keyId)).expires, clock.now() + 60_000);
      for (const keyId of [theirs.keyId, elsewhere.keyId, "key_missing"])
        assertError(t, await h.call("portal.rerollKey", { keyId, expiration: 0 }, as), "err:unkey:data:key_not_found");
    });

    await t.test("the session holds only its scopes", async (t) => {
      const key = await createKey(h, apiId, { externalId: "carol" });
      const readOnly = { rootKey: null, headers: await session(h, "customers", "carol", ["keys:read"]) };
      assertError(
        t,
        await h.call("portal.rerollKey", { keyId: key.keyId, expiration: 0 }, readOnly),
        "err:unkey:authorization:insufficient_permissions",
        /scopes/,
      );
      assertError(t, await h.call("portal.createKey", {}, readOnly), "err:unkey:authorization:insufficient_permissions");
      assertError(
        t,
        await h.call("portal.getVerifications", { startTime: 0, endTime: HOUR }, readOnly),
        "err:unkey:authorization:insufficient_permissions",
      );
      const rerollOnly = { rootKey: null, headers: await session(h, "customers", "carol", ["keys:reroll"]) };
      assertError(t, await h.call("portal.listKeys", {}, rerollOnly), "err:unkey:authorization:insufficient_permissions");
      t.equal((await h.call("portal.rerollKey", { keyId: key.keyId, expiration: 0 }, rerollOnly)).status, 200);
    });

    await t.test("getVerifications: zero-filled buckets by window; 412 with analytics off once there are keys", async (t) => {
      const as = { rootKey: null, headers: await session(h, "customers", "nobody", ["analytics:read"]) };
      const start = Date.UTC(2026, 5, 10, 0, 0, 0);
      const hourly = await h.call("portal.getVerifications", { startTime: start, endTime: start + 2 * 24 * HOUR }, as);
      t.equal(hourly.status, 200);
      t.equal(hourly.body.data.length, 48);
      t.same(hourly.body.data[1], {
        time: start + HOUR,
        total: 0,
        valid: 0,
        rateLimited: 0,
        insufficientPermissions: 0,
        forbidden: 0,
        disabled: 0,
        expired: 0,
        usageExceeded: 0,
      });
      t.equal((await h.call("portal.getVerifications", { startTime: start, endTime: start + HOUR }, as)).body.data.length, 60, "minutes");
      t.equal(
        (await h.call("portal.getVerifications", { startTime: start, endTime: start + 30 * 24 * HOUR }, as)).body.data.length,
        30,
        "days",
      );
      assertInvalidAt(t, await h.call("portal.getVerifications", { startTime: start, endTime: start }, as), "body.endTime");
      assertInvalidAt(t, await h.call("portal.getVerifications", { startTime: 0, endTime: 400 * 24 * HOUR }, as), "body.endTime");
      await createKey(h, apiId, { externalId: "dave" });
      const dave = { rootKey: null, headers: await session(h, "customers", "dave", ["analytics:read"]) };
      assertError(
        t,
        await h.call("portal.getVerifications", { startTime: start, endTime: start + HOUR }, dave),
        "err:unkey:data:analytics_not_configured",
      );
    });

    await t.test("changing the mapping or deleting the portal ends its sessions and pending codes", async (t) => {
      const apiB = await createApi(h, "bbb");
      const apiC = await createApi(h, "ccc");
      await h.call("portal.createPortal", { slug: "moving", displayName: "M", mapping: { type: "keyspace", id: apiB } });
      const cookie = await session(h, "moving", "erin", ["keys:read"]);
      const pending = new URL(
        (await h.call("portal.createSession", { portal: "moving", externalId: "erin", scopes: ["keys:read"] })).body.data.url,
      ).searchParams.get("code");
      t.equal((await h.call("portal.updatePortal", { portal: "moving", displayName: "Same mapping" })).status, 200);
      t.equal((await h.call("portal.listKeys", {}, { rootKey: null, headers: cookie })).status, 200, "other changes keep sessions");
      await h.call("portal.updatePortal", { portal: "moving", mapping: { type: "keyspace", id: apiC } });
      assertError(
        t,
        await h.call("portal.listKeys", {}, { rootKey: null, headers: cookie }),
        "err:unkey:authentication:portal_session_not_found",
        /changed or removed/,
      );
      assertError(
        t,
        await h.call("portal.exchangeCode", { code: pending }, { rootKey: null }),
        "err:unkey:authentication:portal_session_not_found",
        /changed or removed/,
      );

      const again = await session(h, "moving", "erin", ["keys:read"]);
      t.equal((await h.call("portal.listKeys", {}, { rootKey: null, headers: again })).status, 200);
      await h.call("portal.deletePortal", { portal: "moving" });
      assertError(
        t,
        await h.call("portal.listKeys", {}, { rootKey: null, headers: again }),
        "err:unkey:authentication:portal_session_not_found",
      );
    });

    await t.test("a route as the mapping: the APIs its keyauth policies accept", async (t) => {
      const route = await h.call("keygate.createRoute", {
        name: "public-api",
        match: { prefix: "/public" },
        upstream: { targets: [{ url: "http://127.0.0.1:9" }] },
        policies: [{ name: "keys", enabled: true, keyauth: { keyspaces: [apiId, otherApi] } }],
      });
      t.equal(route.status, 200, JSON.stringify(route.body));
      const created = await h.call("portal.createPortal", {
        slug: "routed",
        displayName: "R",
        mapping: { type: "route", id: "public-api" },
      });
      t.equal(created.status, 200, JSON.stringify(created.body));
      await createKey(h, apiId, { externalId: "frank" });
      await createKey(h, otherApi, { externalId: "frank" });
      const as = { rootKey: null, headers: await session(h, "routed", "frank", ["keys:read", "keys:create"]) };
      t.equal((await h.call("portal.listKeys", {}, as)).body.data.length, 2, "keys in both APIs");
      const page = await h.call("portal.listKeys", { limit: 1 }, as);
      const second = await h.call("portal.listKeys", { limit: 1, cursor: page.body.pagination.cursor }, as);
      t.equal(second.body.data.length, 1);
      t.not(second.body.data[0].keyId, page.body.data[0].keyId);
      assertInvalidAt(t, await h.call("portal.createKey", {}, as), "body.apiId");
      t.equal((await h.call("portal.createKey", { apiId: otherApi }, as)).status, 200);
    });
  });
}
