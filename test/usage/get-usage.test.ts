import t from "tap";
import { analyticsDir } from "../helpers/analytics.js";
import { ManualClock } from "../helpers/clock.js";
import { type Harness, harness, OTHER_WORKSPACE, STORAGE_KINDS } from "../helpers/harness.js";

/**
 * keygate.getUsage against the verifications made: keys of two identities (one paying from the identity's
 * balance, one from its own, one of an identity without credits) and a key without an identity, verified over
 * several hours on an injected clock; every bucket of every scope must equal what the test counted.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

// chDB binds one data directory per process: both stores' apps use this one, each in a workspace of its own.
const dir = analyticsDir(t);

type Outcome = "VALID" | "RATE_LIMITED" | "USAGE_EXCEEDED" | "DISABLED";
interface Made {
  hour: number;
  keyId: string;
  identityId: string;
  apiId: string;
  outcome: Outcome;
  credits: number;
  source: "key" | "identity" | "";
}

interface Counted {
  requests: number;
  outcomes: Record<string, number>;
  credits: { total: number; key: number; identity: number };
}

const OUTCOMES = ["VALID", "RATE_LIMITED", "USAGE_EXCEEDED", "DISABLED", "EXPIRED", "FORBIDDEN", "INSUFFICIENT_PERMISSIONS", "NOT_FOUND"];

function count(made: readonly Made[]): Counted {
  const counted: Counted = {
    requests: 0,
    outcomes: Object.fromEntries(OUTCOMES.map((outcome) => [outcome, 0])),
    credits: { total: 0, key: 0, identity: 0 },
  };
  for (const each of made) {
    counted.requests += 1;
    counted.outcomes[each.outcome] = (counted.outcomes[each.outcome] ?? 0) + 1;
    counted.credits.total += each.credits;
    if (each.source === "key") counted.credits.key += each.credits;
    if (each.source === "identity") counted.credits.identity += each.credits;
  }
  return counted;
}

for (const storage of STORAGE_KINDS) {
  t.test(`getUsage equals the verifications made, bucket by bucket (${storage} stores)`, async (t) => {
    const workspace = `ws_usage_${storage}`;
    const API = `api_usage_${storage}`;
    const OTHER_API = `api_usage_${storage}_other`;
    // Six hours ago, on the hour: every row is within the tables' retention, and the hours are whole.
    const start = Math.floor(Date.now() / HOUR) * HOUR - 6 * HOUR;
    const clock = new ManualClock(start);
    const h: Harness = await harness(t, {
      storage,
      clock,
      config: {
        apis: [
          { id: API, name: "usage-main", workspaceId: workspace },
          { id: OTHER_API, name: "usage-other", workspaceId: workspace },
        ],
        analytics: { engine: "embedded", path: dir },
      },
    });
    const root = await h.rootKey(["*"], workspace);
    const call = async (procedure: string, body: unknown, rootKey = root) => {
      const response = await h.call(procedure, body, { rootKey });
      t.equal(response.status, 200, `${procedure}: ${JSON.stringify(response.body)}`);
      return response.body.data;
    };
    // Identity "acme" has a balance of 5 its keys share; "globex" has none.
    await call("identities.createIdentity", { externalId: `acme_${storage}`, credits: { remaining: 5 } });
    await call("identities.createIdentity", { externalId: `globex_${storage}` });
    const acme = (await call("identities.getIdentity", { identity: `acme_${storage}` })).id as string;
    const globex = (await call("identities.getIdentity", { identity: `globex_${storage}` })).id as string;
    const keys = {
      // Pays from acme's balance.
      acmeShared: await call("keys.createKey", { apiId: API, externalId: `acme_${storage}` }),
      // Pays from its own balance of 3 although acme has one.
      acmeOwn: await call("keys.createKey", { apiId: API, externalId: `acme_${storage}`, credits: { remaining: 3 } }),
      // Unlimited, rate limited to 2 a minute.
      globex: await call("keys.createKey", {
        apiId: OTHER_API,
        externalId: `globex_${storage}`,
        ratelimits: [{ name: "burst", limit: 2, duration: 60_000, autoApply: true }],
      }),
      // No identity, own balance of 4.
      lone: await call("keys.createKey", { apiId: API, credits: { remaining: 4 } }),
    };
    const facts = {
      acmeShared: { identityId: acme, apiId: API, source: "identity" as const },
      acmeOwn: { identityId: acme, apiId: API, source: "key" as const },
      globex: { identityId: globex, apiId: OTHER_API, source: "" as const },
      lone: { identityId: "", apiId: API, source: "key" as const },
    };
    const made: Made[] = [];
    const verify = async (name: keyof typeof keys) => {
      const answer = await call("keys.verifyKey", { key: keys[name].key });
      const fact = facts[name];
      const spent = answer.code === "VALID" && fact.source !== "" ? 1 : 0;
      made.push({
        hour: Math.floor(clock.now() / HOUR) * HOUR,
        keyId: keys[name].keyId,
        identityId: fact.identityId,
        apiId: fact.apiId,
        outcome: answer.code,
        credits: spent,
        source: spent > 0 ? fact.source : "",
      });
    };

    // Hour 0: two of each; hour 1: globex is rate limited; hour 2: balances run out; hour 3: nothing;
    // hour 4: the lone key is disabled.
    for (const name of ["acmeShared", "acmeOwn", "globex", "lone", "acmeShared", "acmeOwn", "globex", "lone"] as const) {
      clock.advance(60_000);
      await verify(name);
    }
    clock.set(start + HOUR + 5 * 60_000);
    for (let n = 0; n < 4; n++) await verify("globex");
    clock.set(start + 2 * HOUR + 10 * 60_000);
    for (let n = 0; n < 4; n++) {
      await verify("acmeShared");
      await verify("acmeOwn");
      await verify("lone");
    }
    clock.set(start + 4 * HOUR + 30 * 60_000);
    await call("keys.updateKey", { keyId: keys.lone.keyId, enabled: false });
    await verify("lone");
    await verify("acmeShared");
    // A verification of no key counts for the workspace only.
    await call("keys.verifyKey", { key: "sk_not_a_key_of_anyone" });
    made.push({ hour: start + 4 * HOUR, keyId: "", identityId: "", apiId: "", outcome: "NOT_FOUND" as Outcome, credits: 0, source: "" });
    clock.set(start + 5 * HOUR + 59 * 60_000);
    await h.app.analytics.flush();

    t.ok(
      made.some((each) => each.outcome === "RATE_LIMITED") && made.some((each) => each.outcome === "USAGE_EXCEEDED"),
      "the run has rate-limited and exhausted verifications",
    );
    t.same(
      count(made.filter((each) => each.source !== "")).credits,
      { total: 12, key: 7, identity: 5 },
      "every balance ran out: acme's 5, acmeOwn's 3, lone's 4",
    );

    const scopes: [string, Record<string, string>, (each: Made) => boolean][] = [
      ["the workspace", {}, () => true],
      ["the API", { apiId: API }, (each) => each.apiId === API],
      ["acme by id", { identity: acme }, (each) => each.identityId === acme],
      ["acme by externalId", { identity: `acme_${storage}` }, (each) => each.identityId === acme],
      ["globex", { identity: globex }, (each) => each.identityId === globex],
      ["the lone key", { keyId: keys.lone.keyId }, (each) => each.keyId === keys.lone.keyId],
      ["acme within the other API", { identity: acme, apiId: OTHER_API }, () => false],
    ];
    for (const [label, scope, within] of scopes) {
      const usage = await call("keygate.getUsage", { ...scope, granularity: "hourly", start, end: start + 6 * HOUR });
      t.equal(usage.buckets.length, 6, `${label}: six hourly buckets`);
      for (const [index, bucket] of usage.buckets.entries()) {
        const hour = start + index * HOUR;
        t.same(
          bucket,
          { start: hour, end: hour + HOUR, ...count(made.filter((each) => within(each) && each.hour === hour)) },
          `${label}: hour ${index}`,
        );
      }
      t.same(usage.totals, count(made.filter(within)), `${label}: totals`);
    }

    const daily = await call("keygate.getUsage", { identity: acme, granularity: "daily", start: start + 30 * 60_000 });
    const day = Math.floor(start / DAY) * DAY;
    t.equal(daily.start, day, "the start widens to the whole day");
    t.equal(daily.end, Math.floor(clock.now() / DAY) * DAY + DAY, "no end: up to the end of the current bucket");
    const acmeByDay = count(made.filter((each) => each.identityId === acme));
    t.same(
      daily.buckets.reduce((sum: number, bucket: Counted) => sum + bucket.requests, 0),
      acmeByDay.requests,
      "the days hold every verification of acme",
    );
    const monthly = await call("keygate.getUsage", { granularity: "monthly", start: Date.now() - 10 * DAY });
    t.same(monthly.totals, count(made), "monthly buckets: calendar months, the same totals");
    t.ok(
      monthly.buckets.every((bucket: { start: number }) => new Date(bucket.start).getUTCDate() === 1),
      "each month starts on its first day",
    );
  });
}

t.test("getUsage: its own permission, the caller's workspace only, clear 400s and 412 without analytics", async (t) => {
  const clock = new ManualClock(Date.now());
  const h = await harness(t, {
    clock,
    config: { apis: [{ id: "api_usage_perm", name: "usage-perm", workspaceId: "ws_test" }], analytics: { engine: "embedded", path: dir } },
  });
  const key = (await h.call("keys.createKey", { apiId: "api_usage_perm", externalId: "perm_customer" })).body.data;
  const body = { keyId: key.keyId, granularity: "daily", start: clock.now() - DAY };

  const without = await h.call("keygate.getUsage", body, {
    rootKey: await h.rootKey(["api.*.read_analytics", "identity.*.read_identity"]),
  });
  t.equal(without.status, 403);
  t.match(without.body.error.detail, /usage\.\*\.read_usage/);
  const reader = await h.rootKey(["usage.*.read_usage"]);
  t.equal((await h.call("keygate.getUsage", body, { rootKey: reader })).status, 200, "usage.*.read_usage is enough");
  t.equal((await h.call("keygate.getUsage", body, { rootKey: await h.rootKey(["usage.*"]) })).status, 200, "so is usage.*");

  const other = await h.rootKey(["*"], OTHER_WORKSPACE);
  for (const [label, scope, code] of [
    ["a key", { keyId: key.keyId }, "key_not_found"],
    ["an identity by externalId", { identity: "perm_customer" }, "identity_not_found"],
    ["an API", { apiId: "api_usage_perm" }, "api_not_found"],
  ] as const) {
    const foreign = await h.call("keygate.getUsage", { ...scope, granularity: "daily", start: clock.now() - DAY }, { rootKey: other });
    t.equal(foreign.status, 404, `another workspace's ${label} does not exist for the caller`);
    t.match(foreign.body.error.type, new RegExp(`${code}$`));
  }

  const refusals: [string, Record<string, unknown>, string, RegExp][] = [
    ["an end before the start", { end: clock.now() - 2 * DAY }, "body.end", /greater than start/],
    ["too many buckets", { granularity: "hourly", start: clock.now() - 60 * DAY }, "body.start", /at most 1000/],
    ["a start past retention", { start: clock.now() - 120 * DAY }, "body.start", /kept 90 days/],
    ["an unknown granularity", { granularity: "weekly" }, "body.granularity", /must be one of/],
  ];
  for (const [label, change, location, message] of refusals) {
    const refused = await h.call("keygate.getUsage", { ...body, ...change });
    t.equal(refused.status, 400, label);
    t.equal(refused.body.error.errors?.[0]?.location, location, `${label}: where`);
    t.match(refused.body.error.errors?.[0]?.message, message, `${label}: what`);
  }

  const away = await harness(t, {
    clock,
    config: {
      analytics: { engine: "clickhouse", clickhouse: { url: "http://127.0.0.1:1", requestTimeoutMs: 500 }, query: { maxExecutionMs: 400 } },
    },
  });
  const unavailable = await away.call("keygate.getUsage", { granularity: "daily", start: clock.now() - DAY });
  t.equal(unavailable.status, 503, "a ClickHouse server that cannot be reached: unavailable, for now");
  t.match(unavailable.body.error.type, /analytics_connection_failed$/);

  const off = await harness(t, { clock });
  const refused = await off.call("keygate.getUsage", { granularity: "daily", start: clock.now() - DAY });
  t.equal(refused.status, 412, "analytics off: a precondition fails");
  t.match(refused.body.error.type, /analytics_not_configured$/);
});
