import { existsSync } from "node:fs";
import t from "tap";
import { analyticsDir, analyticsRows, event, gatewayRequestEvent, ratelimitEvent } from "../helpers/analytics.js";
import { harness, OTHER_ROOT_KEY, OTHER_WORKSPACE } from "../helpers/harness.js";
import { checkHostileQueries, type Hostile, hostileAnalyticsConfig, hostileQueriesOver, OUTFILE } from "../helpers/hostile-queries.js";

/**
 * analytics.getRatelimits and analytics.getGatewayRequests against the hostile queries every analytics procedure
 * must withstand (test/helpers/hostile-queries.ts), and against a key confined to one namespace or one API trying
 * to read beyond it. Rows carry markers: the other workspace's `zz_secret`, the out-of-scope namespace's `zz_nsb`
 * and API's `zz_apib`, and each family's own (`zz_rl`, `zz_gw`, `zz_verif`), which must never show up in an
 * answer or error of another family's procedure.
 */

const h = await harness(t, { config: hostileAnalyticsConfig(analyticsDir(t)) });
const apiA = (await h.call("apis.createApi", { name: "alpha" })).body.data.apiId as string;
const apiB = (await h.call("apis.createApi", { name: "beta" })).body.data.apiId as string;
const apiC = (await h.call("apis.createApi", { name: "gamma" }, { rootKey: OTHER_ROOT_KEY })).body.data.apiId as string;
const NS_A = "rlns_alpha";
const NS_B = "rlns_zznsb";
const NS_C = "rlns_zzsecret";

const { sinks } = h.app.services.analytics;
const now = Date.now();
for (let n = 0; n < 200; n++) {
  const time = now - n * 60_000;
  sinks.ratelimits.record(ratelimitEvent({ requestId: `req_rl${n}`, namespaceId: NS_A, identifier: `zz_rl_user_${n % 7}`, time }));
  sinks.gatewayRequests.record(gatewayRequestEvent({ requestId: `req_gw${n}`, apiId: apiA, path: `/zz_gw/${n % 7}`, time }));
}
for (let n = 0; n < 10; n++) {
  const time = now - n * 60_000;
  sinks.ratelimits.record(ratelimitEvent({ requestId: `req_zznsb${n}`, namespaceId: NS_B, identifier: "zz_nsb_user", time }));
  sinks.gatewayRequests.record(
    gatewayRequestEvent({ requestId: `req_zzapib${n}`, apiId: apiB, route: "zz_apib_route", path: "/zz_apib", time }),
  );
}
for (let n = 0; n < 20; n++) {
  const time = now - n * 60_000;
  const other = { workspaceId: OTHER_WORKSPACE, requestId: `req_zzsecret${n}`, time };
  sinks.ratelimits.record(ratelimitEvent({ ...other, namespaceId: NS_C, identifier: "zz_secret_identifier" }));
  sinks.gatewayRequests.record(
    gatewayRequestEvent({ ...other, apiId: apiC, route: "zz_secret_route", path: "/zz_secret", userAgent: "zz_secret_agent" }),
  );
  sinks.verifications.record(event({ requestId: `req_zzverif${n}`, externalId: "zz_verif_user", time }));
}
await h.app.analytics.flush();

/**
 * A key confined to `own` (one namespace or API) trying to read `other`, whose rows carry `otherValue` in `text`,
 * by every route; each answer holds `own`'s rows only.
 */
function scopeEscapes(
  raw: string,
  aggregate: string,
  column: string,
  own: string,
  other: string,
  text: string,
  otherValue: string,
): Hostile[] {
  const onlyOwn = (r: Record<string, unknown>[]) => JSON.stringify(r) === `[{"s":"${own}"}]`;
  const none = (r: Record<string, unknown>[]) => r.length === 0;
  const zero = (r: Record<string, unknown>[]) => r[0]?.n === 0;
  const escapes: Omit<Hostile, "scoped">[] = [
    { what: "naming the other one", sql: `SELECT * FROM ${raw} WHERE ${column} = '${other}'`, expect: "confined", rows: none },
    {
      what: "naming both",
      sql: `SELECT DISTINCT ${column} AS s FROM ${raw} WHERE ${column} IN ('${own}', '${other}')`,
      expect: "confined",
      rows: onlyOwn,
    },
    { what: "every one", sql: `SELECT DISTINCT ${column} AS s FROM ${aggregate}`, expect: "confined", rows: onlyOwn },
    { what: "all but its own", sql: `SELECT count() AS n FROM ${raw} WHERE ${column} != '${own}'`, expect: "confined", rows: zero },
    {
      what: "an OR that is always true",
      sql: `SELECT DISTINCT ${column} AS s FROM ${raw} WHERE 1 = 1 OR ${column} = '${other}'`,
      expect: "confined",
      rows: onlyOwn,
    },
    { what: "PREWHERE", sql: `SELECT * FROM ${raw} PREWHERE ${column} = '${other}'`, expect: "confined", rows: none },
    {
      what: "a CTE of an aggregate",
      sql: `WITH x AS (SELECT * FROM ${aggregate}) SELECT DISTINCT ${column} AS s FROM x`,
      expect: "confined",
      rows: onlyOwn,
    },
    {
      what: "a UNION branch",
      sql: `SELECT ${text} FROM ${raw} WHERE 0 UNION ALL SELECT ${text} FROM ${aggregate} WHERE ${column} = '${other}'`,
      expect: "confined",
      rows: none,
    },
    {
      what: "a self-join",
      sql: `SELECT * FROM ${raw} AS a JOIN ${raw} AS b ON a.${column} != b.${column}`,
      expect: "confined",
      rows: none,
    },
    {
      what: "a scalar subquery",
      sql: `SELECT (SELECT groupArray(${text}) FROM ${raw} WHERE ${column} = '${other}') AS leaked`,
      expect: "confined",
      rows: (r) => JSON.stringify(r) === '[{"leaked":[]}]',
    },
    {
      what: "an IN subquery",
      sql: `SELECT count() AS n FROM ${raw} WHERE ${column} IN (SELECT ${column} FROM ${raw} WHERE ${column} = '${other}')`,
      expect: "confined",
      rows: zero,
    },
    {
      what: "its values",
      sql: `SELECT count() AS n FROM ${aggregate} WHERE ${text} = '${otherValue}'`,
      expect: "confined",
      rows: zero,
    },
  ];
  return escapes.map((attempt) => ({ ...attempt, what: `scoped: ${attempt.what}`, scoped: true }));
}

const RATELIMIT_HOSTILE: Hostile[] = [
  ...hostileQueriesOver({
    raw: "ratelimits_v1",
    aggregate: "ratelimits_per_hour_v1",
    view: "ratelimits_per_day_mv_v1",
    text: "identifier",
    foreign: ["key_verifications_v1", "key_verifications_per_day_v1", "gateway_requests_v1"],
  }),
  {
    what: "a view of another family",
    sql: "SELECT * FROM key_verifications_per_minute_mv_v1",
    expect: "err:user:bad_request:invalid_analytics_table",
  },
  {
    what: "the other workspace's namespace",
    sql: `SELECT count() AS n FROM ratelimits_per_minute_v1 WHERE namespace_id = '${NS_C}'`,
    expect: "confined",
    rows: (r) => r[0]?.n === 0,
  },
  ...scopeEscapes("ratelimits_v1", "ratelimits_per_minute_v1", "namespace_id", NS_A, NS_B, "identifier", "zz_nsb_user"),
];

const GATEWAY_HOSTILE: Hostile[] = [
  ...hostileQueriesOver({
    raw: "gateway_requests_v1",
    aggregate: "gateway_requests_v1",
    view: "ratelimits_per_hour_mv_v1",
    text: "path",
    foreign: ["ratelimits_v1", "ratelimits_per_month_v1", "key_verifications_per_hour_v1"],
  }),
  {
    what: "the other workspace's API",
    sql: `SELECT count() AS n FROM gateway_requests_v1 WHERE api_id = '${apiC}'`,
    expect: "confined",
    rows: (r) => r[0]?.n === 0,
  },
  {
    what: "the other workspace's route",
    sql: "SELECT count() AS n FROM gateway_requests_v1 WHERE app_id = 'zz_secret_route' OR user_agent LIKE '%secret%'",
    expect: "confined",
    rows: (r) => r[0]?.n === 0,
  },
  ...scopeEscapes("gateway_requests_v1", "gateway_requests_v1", "api_id", apiA, apiB, "path", "/zz_apib"),
];

t.ok(RATELIMIT_HOSTILE.length >= 25 && GATEWAY_HOSTILE.length >= 25, "at least 25 hostile queries for each procedure");
await checkHostileQueries(t, h, "analytics.getRatelimits", RATELIMIT_HOSTILE, {
  forbidden: /zz_?secret|zz_gw|zz_verif/i,
  scopedKey: await h.rootKey([`ratelimit.${NS_A}.read_analytics`]),
  outOfScope: /zz_?nsb/i,
});
await checkHostileQueries(t, h, "analytics.getGatewayRequests", GATEWAY_HOSTILE, {
  forbidden: /zz_?secret|zz_rl|zz_verif/i,
  scopedKey: await h.rootKey([`api.${apiA}.read_analytics`]),
  outOfScope: /zz_?apib/i,
});

t.test("afterwards nothing was written or leaked to disk, and the engine still answers", async (t) => {
  const count = "SELECT count() AS n FROM";
  t.same(await analyticsRows(h, "analytics.getRatelimits", `${count} ratelimits_v1`), [{ n: 210 }]);
  t.same(await analyticsRows(h, "analytics.getRatelimits", "SELECT sum(total) AS n FROM ratelimits_per_hour_v1", OTHER_ROOT_KEY), [
    { n: 20 },
  ]);
  t.same(await analyticsRows(h, "analytics.getGatewayRequests", `${count} gateway_requests_v1`), [{ n: 210 }]);
  t.same(await analyticsRows(h, "analytics.getGatewayRequests", `${count} gateway_requests_v1`, OTHER_ROOT_KEY), [{ n: 20 }]);
  t.same(await analyticsRows(h, "analytics.getVerifications", `${count} key_verifications_v1`), [{ n: 20 }]);
  t.notOk(existsSync(OUTFILE), "INTO OUTFILE wrote nothing");
});
