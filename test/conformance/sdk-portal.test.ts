import { NotFoundErrorResponse, UnauthorizedErrorResponse } from "@unkey/api/models/errors";
import t from "tap";
import { analyticsDir } from "../helpers/analytics.js";
import { STORAGE_KINDS } from "../helpers/harness.js";
import { rejectsWith, sdkApp } from "./helpers.js";

// The SDK's portal.* functions against a listening keygate: createSession and exchangeCode with a root key and
// without, the customer's listKeys, rerollKey and getVerifications with the session cookie alone.

// chDB binds one data directory per process: both stores' apps use this one, each in a workspace of its own.
const dir = analyticsDir(t);

for (const storage of STORAGE_KINDS) {
  await t.test(`the SDK's portal functions against keygate on ${storage} stores`, async (t) => {
    const app = await sdkApp(t, { storage, config: { analytics: { engine: "embedded", path: dir } } });
    const { h, baseUrl } = app;
    const workspace = `ws_portal_sdk_${storage}`;
    const unkey = app.client(await h.rootKey(["*"], workspace));
    const operator = await h.rootKey(["*"], workspace);
    const apiId = (await unkey.apis.createApi({ name: "portal-sdk" })).data.apiId;
    const slug = `sdk-portal-${storage}`;
    const created = await h.call(
      "portal.createPortal",
      { slug, displayName: "SDK", mapping: { type: "keyspace", id: apiId } },
      { rootKey: operator },
    );
    t.equal(created.status, 200);
    const mine = (await unkey.keys.createKey({ apiId, externalId: "sdk_user", name: "mine" })).data;
    const theirs = (await unkey.keys.createKey({ apiId, externalId: "someone_else" })).data;

    const minted = await unkey.portal.createSession({
      portal: slug,
      externalId: "sdk_user",
      scopes: ["keys:read", "keys:reroll", "analytics:read"],
      returnUrl: "https://app.test/keys",
    });
    t.same(minted.headers["cache-control"], ["no-store"]);
    const session = minted.result.data;
    t.match(session.id, /^ps_/);
    t.ok(session.url.startsWith(`${baseUrl}/portal/${slug}?code=pst_`), session.url);
    const code = new URL(session.url).searchParams.get("code") as string;

    const exchange = await unkey.portal.exchangeCode({ code });
    t.same(exchange.headers["cache-control"], ["no-store"]);
    const exchanged = exchange.result.data;
    t.match(exchanged.accessToken, /^pat_/);
    await rejectsWith(t, unkey.portal.exchangeCode({ code }), UnauthorizedErrorResponse, 401, "a second redemption");

    const security = { portalSession: exchanged.accessToken };
    for (let n = 0; n < 3; n++) t.equal((await unkey.keys.verifyKey({ key: mine.key })).data.valid, true);
    await h.app.analytics.flush();
    const listed = await unkey.portal.listKeys(security, {});
    t.same(
      listed.result.data.map((key) => key.keyId),
      [mine.keyId],
      "the customer's keys only",
    );
    const usage = await h.call("portal.listKeys", {}, { rootKey: null, headers: { cookie: `portal_session=${exchanged.accessToken}` } });
    t.equal(usage.body.data[0].verifications, 3, "this month's verifications");
    t.ok(usage.body.data[0].lastUsed > 0, "lastUsed");
    const rerolled = (await unkey.portal.rerollKey(security, { keyId: mine.keyId, expiration: 0 })).data;
    t.not(rerolled.keyId, mine.keyId);
    await rejectsWith(
      t,
      unkey.portal.rerollKey(security, { keyId: theirs.keyId, expiration: 0 }),
      NotFoundErrorResponse,
      404,
      "another customer's key",
    );
    await rejectsWith(t, unkey.portal.listKeys({ portalSession: "pat_forged" }, {}), UnauthorizedErrorResponse, 401, "a forged session");

    const now = Date.now();
    const series = (await unkey.portal.getVerifications(security, { startTime: now - 3_600_000, endTime: now + 60_000 })).data;
    t.ok(series.length >= 61 && series.length <= 62, `${series.length} minute buckets`);
    t.same(Object.keys(series[0] ?? {}).sort(), [
      "disabled",
      "expired",
      "forbidden",
      "insufficientPermissions",
      "rateLimited",
      "time",
      "total",
      "usageExceeded",
      "valid",
    ]);
    t.equal(
      series.reduce((sum, point) => sum + point.valid, 0),
      3,
      "the three verifications, all valid",
    );
    const perKey = await h.call(
      "portal.getVerifications",
      { startTime: now - 3_600_000, endTime: now + 60_000, byKey: true },
      { rootKey: null, headers: { cookie: `portal_session=${exchanged.accessToken}` } },
    );
    const keyed = perKey.body.data.flatMap((point: { keys: { keyId: string; valid: number }[] }) => point.keys);
    t.same([...new Set(keyed.map((entry: { keyId: string }) => entry.keyId))], [mine.keyId], "per key, in one call");
  });
}
