import { existsSync } from "node:fs";
import t from "tap";
import { analyticsDir, event } from "../helpers/analytics.js";
import { harness, OTHER_ROOT_KEY, OTHER_WORKSPACE, WORKSPACE } from "../helpers/harness.js";
import { checkHostileQueries, type Hostile, hostileAnalyticsConfig, hostileQueriesOver, OUTFILE } from "../helpers/hostile-queries.js";

/**
 * analytics.getVerifications against the hostile queries (test/helpers/hostile-queries.ts) and those about key
 * spaces. Each is refused with the expected error or answered confined to the caller's rows; and no answer,
 * refusal or error message ever carries a value of another workspace (or, for a per-API key, of another API).
 */

const h = await harness(t, { config: hostileAnalyticsConfig(analyticsDir(t)) });
const apiA = (await h.call("apis.createApi", { name: "alpha" })).body.data.apiId as string;
const apiB = (await h.call("apis.createApi", { name: "beta" })).body.data.apiId as string;
const apiC = (await h.call("apis.createApi", { name: "gamma" }, { rootKey: OTHER_ROOT_KEY })).body.data.apiId as string;
const ks = {
  A: (await h.app.stores.apis.get(WORKSPACE, apiA))?.keySpaceId as string,
  B: (await h.app.stores.apis.get(WORKSPACE, apiB))?.keySpaceId as string,
  C: (await h.app.stores.apis.get(OTHER_WORKSPACE, apiC))?.keySpaceId as string,
};
const now = Date.now();
for (let n = 0; n < 200; n++)
  h.app.services.analytics.sinks.verifications.record(
    event({ requestId: `req_a${n}`, keySpaceId: ks.A, externalId: `user_${n % 7}`, time: now - n * 60_000 }),
  );
for (let n = 0; n < 10; n++)
  h.app.services.analytics.sinks.verifications.record(
    event({ requestId: `req_zzapib${n}`, keySpaceId: ks.B, externalId: "zz_apib_user", tags: ["zz_apib_tag"], time: now - n * 60_000 }),
  );
for (let n = 0; n < 20; n++) {
  h.app.services.analytics.sinks.verifications.record(
    event({
      requestId: `req_zzsecret${n}`,
      workspaceId: OTHER_WORKSPACE,
      keySpaceId: ks.C,
      keyId: "key_zzsecret",
      identityId: "id_zzsecret",
      externalId: "zz_secret_external",
      tags: ["zz_secret_tag"],
      time: now - n * 60_000,
    }),
  );
}
await h.app.analytics.flush();
const perApiKey = await h.rootKey([`api.${apiA}.read_analytics`]);

const HOSTILE: Hostile[] = [
  ...hostileQueriesOver({
    raw: "key_verifications_v1",
    aggregate: "key_verifications_per_hour_v1",
    view: "key_verifications_per_day_mv_v1",
    text: "external_id",
    foreign: ["ratelimits_v1", "gateway_requests_v1"],
  }),
  {
    what: "another workspace's key space",
    sql: `SELECT * FROM key_verifications_v1 WHERE key_space_id = '${ks.C}'`,
    expect: "err:unkey:data:key_space_not_found",
  },
  // a key for API A only
  {
    what: "per API: another API's key space",
    sql: `SELECT * FROM key_verifications_v1 WHERE key_space_id = '${ks.B}'`,
    expect: "err:unkey:authorization:insufficient_permissions",
    scoped: true,
  },
  {
    what: "per API: both key spaces",
    sql: `SELECT * FROM key_verifications_v1 WHERE key_space_id IN ('${ks.A}', '${ks.B}')`,
    expect: "err:unkey:authorization:insufficient_permissions",
    scoped: true,
  },
  {
    what: "per API: every key space",
    sql: "SELECT DISTINCT key_space_id AS k FROM key_verifications_v1",
    expect: "confined",
    scoped: true,
    rows: (r) => JSON.stringify(r) === `[{"k":"${ks.A}"}]`,
  },
  {
    what: "per API: all but its own",
    sql: `SELECT count() AS n FROM key_verifications_v1 WHERE key_space_id != '${ks.A}'`,
    expect: "confined",
    scoped: true,
    rows: (r) => r[0]?.n === 0,
  },
  {
    what: "per API: through a CTE of an aggregate",
    sql: "WITH x AS (SELECT * FROM key_verifications_per_hour_v1) SELECT DISTINCT key_space_id AS k FROM x",
    expect: "confined",
    scoped: true,
    rows: (r) => JSON.stringify(r) === `[{"k":"${ks.A}"}]`,
  },
  {
    what: "per API: the other API's external ids",
    sql: "SELECT count() AS n FROM key_verifications_per_day_v1 WHERE external_id = 'zz_apib_user'",
    expect: "confined",
    scoped: true,
    rows: (r) => r[0]?.n === 0,
  },
];

t.ok(HOSTILE.length >= 40);
await checkHostileQueries(t, h, "analytics.getVerifications", HOSTILE, {
  forbidden: /zz_?secret/i,
  scopedKey: perApiKey,
  outOfScope: /zz_?apib/i,
});

t.test("afterwards nothing was written, dropped or leaked to disk, and the engine still answers", async (t) => {
  t.same(
    (
      await h.call("analytics.getVerifications", {
        query: "SELECT key_space_id AS k, count() AS n FROM key_verifications_v1 GROUP BY k ORDER BY n DESC",
      })
    ).body.data,
    [
      { k: ks.A, n: 200 },
      { k: ks.B, n: 10 },
    ],
  );
  t.same(
    (await h.call("analytics.getVerifications", { query: "SELECT count() AS n FROM key_verifications_v1" }, { rootKey: OTHER_ROOT_KEY }))
      .body.data,
    [{ n: 20 }],
  );
  t.notOk(existsSync(OUTFILE), "INTO OUTFILE wrote nothing");
});
