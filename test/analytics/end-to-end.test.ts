import type { AddressInfo } from "node:net";
import t from "tap";
import type { VerificationCode } from "../../src/domain/verification/verification.js";
import { analyticsDir } from "../helpers/analytics.js";
import { ManualClock } from "../helpers/clock.js";
import { type Harness, harness, STORAGE_KINDS } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";

/**
 * Analytics end to end: a known mix of verifications, made through POST /v2/keys.verifyKey and through the gateway,
 * must come back from analytics.getVerifications exactly: per outcome in the raw table and in every aggregate,
 * per key with the credits spent, with the tags sent, one row per request id, and for a per-API root key only
 * the rows of its API.
 */

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const AGGREGATES = [
  "key_verifications_per_minute_v1",
  "key_verifications_per_hour_v1",
  "key_verifications_per_day_v1",
  "key_verifications_per_month_v1",
];

// chDB binds one data directory per process: both stores' apps use this one, each in a workspace of its own.
const dir = analyticsDir(t);

/** One verification as it was made, i.e. the row analytics must hold for it. */
interface Made {
  via: "verifyKey" | "gateway";
  requestId: string;
  outcome: VerificationCode;
  keyId: string;
  keySpaceId: string;
  identityId: string;
  externalId: string;
  tags: string[];
  spentCredits: number;
}

/** A key as the test knows it; `unknown` stands for a key keygate does not hold. */
interface Fixture {
  label: string;
  key: string;
  keyId: string;
  keySpaceId: string;
  identityId: string;
  externalId: string;
}

/** How the gateway answers each outcome: status and the last segment of error.type. */
const GATEWAY_ANSWER: Record<VerificationCode, [number, string | undefined]> = {
  VALID: [200, undefined],
  NOT_FOUND: [401, "invalid_key"],
  FORBIDDEN: [403, "ip_not_allowed"],
  DISABLED: [401, "key_disabled"],
  EXPIRED: [401, "key_expired"],
  INSUFFICIENT_PERMISSIONS: [403, "insufficient_permissions"],
  RATE_LIMITED: [429, "rate_limited"],
  USAGE_EXCEEDED: [429, "usage_exceeded"],
};

function tally<T>(items: readonly T[], by: (item: T) => string, weight: (item: T) => number = () => 1): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[by(item)] = (counts[by(item)] ?? 0) + weight(item);
  return counts;
}

const asTally = (rows: Record<string, unknown>[], key: string, value: string): Record<string, number> =>
  Object.fromEntries(
    rows.map((row) => [typeof row[key] === "string" ? (row[key] as string) : JSON.stringify(row[key]), Number(row[value])]),
  );

for (const storage of STORAGE_KINDS) {
  await t.test(`analytics counts equal the verifications made through keys.verifyKey and the gateway (${storage} stores)`, async (t) => {
    const workspace = `ws_e2e_${storage}`;
    const API = `api_e2e_${storage}_main`;
    const OTHER_API = `api_e2e_${storage}_other`;
    // Both allowlists are set in the configuration: one keeps the test's loopback client out, one lets it in.
    const FENCED_API = `api_e2e_${storage}_fenced`;
    const LOOPBACK_API = `api_e2e_${storage}_loopback`;
    // Frozen at the real time: rate limit windows cannot roll over mid-test, and every row carries this instant,
    // which is inside the tables' retention (the engine counts it from its own now()).
    const clock = new ManualClock(Date.now());
    const upstream = await startUpstream(t);
    const h: Harness = await harness(t, {
      storage,
      clock,
      config: {
        apis: [
          { id: API, name: "e2e-main", workspaceId: workspace },
          { id: OTHER_API, name: "e2e-other", workspaceId: workspace },
          { id: FENCED_API, name: "e2e-fenced", workspaceId: workspace, ipAllowlist: ["203.0.113.0/24", "2001:db8::/32"] },
          { id: LOOPBACK_API, name: "e2e-loopback", workspaceId: workspace, ipAllowlist: ["127.0.0.0/8", "::1"] },
        ],
        routes: [
          {
            name: "orders",
            match: { prefix: "/orders" },
            upstream: upstream.url,
            apiId: API,
            permissions: "orders.read",
            credits: { cost: 2 },
          },
          { name: "open", match: { prefix: "/open" }, upstream: upstream.url, apiId: API },
          { name: "other", match: { prefix: "/other" }, upstream: upstream.url, apiId: OTHER_API },
          { name: "fenced", match: { prefix: "/fenced" }, upstream: upstream.url, apiId: FENCED_API },
          { name: "loopback", match: { prefix: "/loopback" }, upstream: upstream.url, apiId: LOOPBACK_API },
          { name: "readonly", match: { prefix: "/readonly", methods: ["GET"] }, upstream: upstream.url, apiId: API },
        ],
        analytics: { engine: "embedded", path: dir, query: { maxExecutionMs: 10_000 } },
      },
    });
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
    const root = await h.rootKey(["*"], workspace);
    const keySpaceOf = async (apiId: string) => (await h.app.stores.apis.get(workspace, apiId))?.keySpaceId as string;
    const ksMain = await keySpaceOf(API);
    const ksOther = await keySpaceOf(OTHER_API);

    const createKey = async (label: string, apiId: string, fields: Record<string, unknown> = {}): Promise<Fixture> => {
      const created = await h.call("keys.createKey", { apiId, ...fields }, { rootKey: root });
      if (created.status !== 200) throw new Error(`createKey ${label}: ${JSON.stringify(created.body)}`);
      const read = (await h.call("keys.getKey", { keyId: created.body.data.keyId }, { rootKey: root })).body.data;
      return {
        label,
        key: created.body.data.key,
        keyId: created.body.data.keyId,
        keySpaceId: await keySpaceOf(apiId),
        identityId: read.identity?.id ?? "",
        externalId: read.identity?.externalId ?? "",
      };
    };
    const unknown: Fixture = {
      label: "unknown",
      key: `sk_e2e_${storage}_not_a_key`,
      keyId: "",
      keySpaceId: "",
      identityId: "",
      externalId: "",
    };
    const alice = await createKey("alice", API, { externalId: "e2e_alice", permissions: ["orders.read"], credits: { remaining: 50 } });
    const disabled = await createKey("disabled", API, { enabled: false, permissions: ["orders.read"] });
    const expired = await createKey("expired", API, { expires: clock.now() - HOUR, permissions: ["orders.read"] });
    const unprivileged = await createKey("unprivileged", API, { permissions: ["billing.read"] });
    const limited = await createKey("limited", API, { ratelimits: [{ name: "requests", limit: 2, duration: MINUTE, autoApply: true }] });
    const poor = await createKey("poor", API, { credits: { remaining: 1 } });
    const bob = await createKey("bob", OTHER_API, { externalId: "e2e_bob", credits: { remaining: 10 } });
    const fenced = await createKey("fenced", FENCED_API, { credits: { remaining: 5 } });
    const loopback = await createKey("loopback", LOOPBACK_API);
    const initialCredits = new Map([
      [alice.keyId, 50],
      [poor.keyId, 1],
      [bob.keyId, 10],
      [fenced.keyId, 5],
    ]);

    const made: Made[] = [];
    /** The row a verification of `key` with `outcome` writes; NOT_FOUND rows name no key. */
    const record = (via: Made["via"], requestId: string, key: Fixture, outcome: VerificationCode, spentCredits: number, tags: string[]) => {
      const named = outcome === "NOT_FOUND" ? unknown : key;
      made.push({
        via,
        requestId,
        outcome,
        keyId: named.keyId,
        keySpaceId: named.keySpaceId,
        identityId: named.identityId,
        externalId: named.externalId,
        tags,
        spentCredits,
      });
    };

    const viaVerifyKey = async (key: Fixture, outcome: VerificationCode, spentCredits: number, body: Record<string, unknown> = {}) => {
      const result = await h.call("keys.verifyKey", { key: key.key, ...body }, { rootKey: root });
      t.equal(result.status, 200);
      t.equal(result.body?.data?.code, outcome, `verifyKey ${key.label}: ${outcome}`);
      record("verifyKey", result.body.meta.requestId, key, outcome, spentCredits, (body.tags as string[] | undefined) ?? []);
    };
    const viaGateway = async (path: string, key: Fixture, outcome: VerificationCode, spentCredits: number) => {
      const response = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key.key}` } });
      const body = (await response.json()) as { error?: { type: string } };
      const [status, type] = GATEWAY_ANSWER[outcome];
      t.same([response.status, body.error?.type.split("/").pop()], [status, type], `${path} with ${key.label}: ${outcome}`);
      record("gateway", response.headers.get("x-request-id") as string, key, outcome, spentCredits, []);
    };
    for (let n = 0; n < 3; n++) await viaVerifyKey(alice, "VALID", 3, { credits: { cost: 3 }, tags: ["path=/v1/orders", "env=e2e"] });
    await viaVerifyKey(alice, "VALID", 1, { permissions: "orders.read", tags: ["path=/v1/orders/42"] });
    for (let n = 0; n < 2; n++) await viaVerifyKey(unknown, "NOT_FOUND", 0, { tags: ["probe=unknown"] });
    for (let n = 0; n < 2; n++) await viaVerifyKey(disabled, "DISABLED", 0);
    await viaVerifyKey(expired, "EXPIRED", 0, { tags: ["env=e2e"] });
    for (let n = 0; n < 2; n++) await viaVerifyKey(unprivileged, "INSUFFICIENT_PERMISSIONS", 0, { permissions: "orders.read" });
    for (const outcome of ["VALID", "VALID", "RATE_LIMITED"] as const) await viaVerifyKey(limited, outcome, 0);
    await viaVerifyKey(poor, "VALID", 1);
    await viaVerifyKey(poor, "USAGE_EXCEEDED", 0);
    for (let n = 0; n < 2; n++) await viaVerifyKey(bob, "VALID", 1, { tags: ["tenant=bob"] });
    for (let n = 0; n < 2; n++) await viaVerifyKey(fenced, "FORBIDDEN", 0, { tags: ["fence=out"] });
    await viaVerifyKey(loopback, "VALID", 0);

    for (let n = 0; n < 2; n++) await viaGateway("/orders/1", alice, "VALID", 2);
    await viaGateway("/orders/2", unprivileged, "INSUFFICIENT_PERMISSIONS", 0);
    await viaGateway("/orders/3", disabled, "DISABLED", 0);
    for (let n = 0; n < 2; n++) await viaGateway("/orders/4", expired, "EXPIRED", 0);
    await viaGateway("/orders/5", unknown, "NOT_FOUND", 0);
    await viaGateway("/orders/6", bob, "NOT_FOUND", 0);
    await viaGateway("/open", limited, "RATE_LIMITED", 0);
    await viaGateway("/open", poor, "USAGE_EXCEEDED", 0);
    await viaGateway("/other", bob, "VALID", 1);
    for (let n = 0; n < 3; n++) await viaGateway("/fenced/1", fenced, "FORBIDDEN", 0);
    await viaGateway("/loopback/1", loopback, "VALID", 0);

    // Requests that verify nothing: no key, no route, a method the route does not take.
    t.equal((await fetch(`${base}/orders/7`)).status, 401);
    t.equal((await fetch(`${base}/orders/7`, { headers: { authorization: "Basic abc" } })).status, 401);
    t.equal((await fetch(`${base}/nowhere`, { headers: { authorization: `Bearer ${alice.key}` } })).status, 404);
    t.equal(
      (await fetch(`${base}/readonly`, { method: "POST", headers: { authorization: `Bearer ${alice.key}` }, body: "{}" })).status,
      405,
    );

    await h.app.analytics.flush();
    t.comment(
      `made: ${made.length} verifications (${made.filter((m) => m.via === "verifyKey").length} verifyKey, ${made.filter((m) => m.via === "gateway").length} gateway)`,
    );
    t.comment(`per outcome: ${JSON.stringify(tally(made, (m) => m.outcome))}`);

    const rows = async (query: string, rootKey = root): Promise<Record<string, unknown>[]> => {
      const result = await h.call("analytics.getVerifications", { query }, { rootKey });
      if (result.status !== 200) throw new Error(`${query} → ${result.status} ${JSON.stringify(result.body)}`);
      return result.body.data;
    };
    const byOutcome = () => tally(made, (m) => m.outcome);

    await t.test("the raw table holds one row per verification, exactly as it was made", async (t) => {
      const raw = await rows(
        "SELECT request_id, outcome, key_id, key_space_id, identity_id, external_id, tags, spent_credits, time FROM key_verifications_v1 ORDER BY request_id",
      );
      t.equal(raw.length, made.length, "no more and no fewer rows than verifications (the 401/404/405 without a verification add none)");
      const expected = [...made]
        .sort((a, b) => (a.requestId < b.requestId ? -1 : a.requestId > b.requestId ? 1 : 0))
        .map((m) => ({
          request_id: m.requestId,
          outcome: m.outcome,
          key_id: m.keyId,
          key_space_id: m.keySpaceId,
          identity_id: m.identityId,
          external_id: m.externalId,
          tags: m.tags,
          spent_credits: m.spentCredits,
          time: clock.now(),
        }));
      t.same(raw, expected);
      t.match(alice.identityId, /^id_/, "alice's rows carry her identity");
    });

    await t.test("counts per outcome: count() of the raw table and SUM(count) of every aggregate equal what was made", async (t) => {
      t.same(
        asTally(await rows("SELECT outcome, count() AS n FROM key_verifications_v1 GROUP BY outcome"), "outcome", "n"),
        byOutcome(),
        "key_verifications_v1",
      );
      for (const table of AGGREGATES) {
        t.same(asTally(await rows(`SELECT outcome, SUM(count) AS n FROM ${table} GROUP BY outcome`), "outcome", "n"), byOutcome(), table);
      }
      t.same(
        await rows(
          "SELECT SUM(count) AS total, sumIf(count, outcome = 'VALID') AS valid FROM key_verifications_per_day_v1 WHERE time >= now() - INTERVAL 7 DAY",
        ),
        [{ total: made.length, valid: made.filter((m) => m.outcome === "VALID").length }],
        "the example query's kind (docs/decisions.md#analytics)",
      );
      t.same(
        await rows("SELECT DISTINCT time FROM key_verifications_per_day_v1"),
        [{ time: new Date(clock.now()).toISOString().slice(0, 10) }],
        "the day of the verifications",
      );
      const throughGateway = made.filter((m) => m.via === "gateway");
      t.same(
        asTally(
          await rows(
            `SELECT outcome, count() AS n FROM key_verifications_v1 WHERE request_id IN (${throughGateway.map((m) => `'${m.requestId}'`).join(", ")}) GROUP BY outcome`,
          ),
          "outcome",
          "n",
        ),
        tally(throughGateway, (m) => m.outcome),
        "the gateway's verifications, by outcome",
      );
    });

    await t.test("per key: counts and spent credits match, and so does each key's balance", async (t) => {
      const expectedCounts = tally(made, (m) => m.keyId);
      const expectedSpent = tally(
        made,
        (m) => m.keyId,
        (m) => m.spentCredits,
      );
      const raw = await rows("SELECT key_id, count() AS n, SUM(spent_credits) AS spent FROM key_verifications_v1 GROUP BY key_id");
      t.same(asTally(raw, "key_id", "n"), expectedCounts, "raw: verifications per key ('' for NOT_FOUND)");
      t.same(asTally(raw, "key_id", "spent"), expectedSpent, "raw: credits spent per key");
      for (const table of AGGREGATES) {
        const aggregated = await rows(`SELECT key_id, SUM(count) AS n, SUM(spent_credits) AS spent FROM ${table} GROUP BY key_id`);
        t.same(asTally(aggregated, "key_id", "n"), expectedCounts, `${table}: verifications per key`);
        t.same(asTally(aggregated, "key_id", "spent"), expectedSpent, `${table}: credits spent per key`);
      }
      for (const [keyId, initial] of initialCredits) {
        const remaining = (await h.call("keys.getKey", { keyId }, { rootKey: root })).body.data.credits.remaining;
        t.equal(initial - remaining, expectedSpent[keyId] ?? 0, `${keyId}: the balance went down by the credits analytics counts`);
      }
      t.same(
        asTally(
          await rows("SELECT external_id, SUM(count) AS n FROM key_verifications_per_day_v1 GROUP BY external_id"),
          "external_id",
          "n",
        ),
        tally(made, (m) => m.externalId),
        "per identity",
      );
    });

    await t.test("the tags sent to verifyKey come back, in the raw table and in the aggregates", async (t) => {
      const expected = tally(made, (m) => JSON.stringify(m.tags));
      t.same(
        asTally(await rows("SELECT tags, count() AS n FROM key_verifications_v1 GROUP BY tags"), "tags", "n"),
        expected,
        "raw, per tag list",
      );
      t.same(
        asTally(await rows("SELECT tags, SUM(count) AS n FROM key_verifications_per_day_v1 GROUP BY tags"), "tags", "n"),
        expected,
        "per day, per tag list",
      );
      const perTag = tally(
        made.flatMap((m) => m.tags),
        (tag) => tag,
      );
      t.same(
        asTally(await rows("SELECT tag, count() AS n FROM key_verifications_v1 ARRAY JOIN tags AS tag GROUP BY tag"), "tag", "n"),
        perTag,
        "per single tag",
      );
      t.same(perTag, { "path=/v1/orders": 3, "env=e2e": 4, "path=/v1/orders/42": 1, "probe=unknown": 2, "tenant=bob": 2, "fence=out": 2 });
    });

    await t.test("a per-API root key sees only the rows of its API", async (t) => {
      const onlyMain = await h.rootKey([`api.${API}.read_analytics`], workspace);
      const mine = made.filter((m) => m.keySpaceId === ksMain);
      t.same(
        asTally(await rows("SELECT outcome, count() AS n FROM key_verifications_v1 GROUP BY outcome", onlyMain), "outcome", "n"),
        tally(mine, (m) => m.outcome),
        "raw, per outcome",
      );
      t.same(
        asTally(await rows("SELECT outcome, SUM(count) AS n FROM key_verifications_per_day_v1 GROUP BY outcome", onlyMain), "outcome", "n"),
        tally(mine, (m) => m.outcome),
        "per day, per outcome",
      );
      t.same(
        await rows("SELECT DISTINCT key_space_id FROM key_verifications_v1", onlyMain),
        [{ key_space_id: ksMain }],
        "no NOT_FOUND rows, no other API's rows",
      );
      t.same(await rows("SELECT count() AS n FROM key_verifications_v1 WHERE external_id = 'e2e_bob'", onlyMain), [{ n: 0 }]);

      const onlyOther = await h.rootKey([`api.${OTHER_API}.read_analytics`], workspace);
      const theirs = made.filter((m) => m.keySpaceId === ksOther);
      t.same(
        asTally(await rows("SELECT key_id, SUM(count) AS n FROM key_verifications_per_day_v1 GROUP BY key_id", onlyOther), "key_id", "n"),
        { [bob.keyId]: theirs.length },
      );
      t.equal(theirs.length, 3, "bob's two verifyKey calls and one through /other; his NOT_FOUND on /orders names no key");
    });
  });
}
