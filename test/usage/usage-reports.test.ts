import t, { type Test } from "tap";
import { reportId } from "../../src/domain/usage/usage-events.js";
import type { UsageReporterDeps } from "../../src/domain/usage/usage-reporter.js";
import { UsageReporter } from "../../src/domain/usage/usage-reporter.js";
import { analyticsDir, event } from "../helpers/analytics.js";
import { ManualClock } from "../helpers/clock.js";
import { type Harness, harness, OTHER_WORKSPACE, STORAGE_KINDS } from "../helpers/harness.js";
import { Receiver, verifySignature } from "../helpers/webhook-receiver.js";

/**
 * usage.reported and usage.corrected, made by the reporter on an injected clock: one event per subject and closed
 * period, after the period's delay, with the numbers getUsage answers for it and ids derived from endpoint,
 * subject and period; made once however often the reporter runs; corrected when late usage arrives; replayed with
 * the same ids.
 */

const HOUR = 3_600_000;
const MINUTE = 60_000;
/** analytics.buffer.flushIntervalMs (5 s by default) plus the margin of a minute. */
const DELAY = 65_000;

// chDB binds one data directory per process: every app of this file uses this one, each in a workspace of its own.
const dir = analyticsDir(t);

interface CloudEvent {
  specversion: string;
  id: string;
  source: string;
  type: string;
  subject: string;
  time: string;
  datacontenttype: string;
  data: Record<string, any>;
}

const cloudEvents = (receiver: Receiver, type: string): CloudEvent[] =>
  receiver.received.map((each) => JSON.parse(each.body) as CloudEvent).filter((each) => each.type === type);

async function setup(t: Test, storage: (typeof STORAGE_KINDS)[number], workspace: string) {
  const start = Math.floor(Date.now() / HOUR) * HOUR - 8 * HOUR;
  const clock = new ManualClock(start);
  const receiver = new Receiver();
  await receiver.start();
  t.teardown(() => receiver.stop());
  const h: Harness = await harness(t, {
    storage,
    clock,
    config: {
      apis: [{ id: `api_${workspace}`, name: "reports", workspaceId: workspace }],
      analytics: { engine: "embedded", path: dir },
      // The test runs the reporter and the deliverer itself.
      webhooks: { deliver: false, allowPrivateAddresses: true },
    },
  });
  const root = await h.rootKey(["*"], workspace);
  const call = async (procedure: string, body: unknown, rootKey = root) => {
    const response = await h.call(procedure, body, { rootKey });
    t.equal(response.status, 200, `${procedure}: ${JSON.stringify(response.body)}`);
    return response.body.data;
  };
  const webhooks = h.app.services.webhooks;
  /** What the analytics pipeline has done by the delay, then one reporter pass and the deliveries. */
  const pass = async () => {
    await h.app.analytics.flush();
    const produced = await webhooks.usageReporter.produce();
    while ((await webhooks.deliverer.deliverDue()) > 0);
    return produced;
  };
  return { start, clock, receiver, h, root, call, pass };
}

for (const storage of STORAGE_KINDS) {
  t.test(`a usage report per subject and closed period, made once, corrected and replayed (${storage} stores)`, async (t) => {
    const workspace = `ws_reports_${storage}`;
    const { start, clock, receiver, h, root, call, pass } = await setup(t, storage, workspace);
    const API = `api_${workspace}`;
    const hook = await call("keygate.createWebhook", {
      url: receiver.url,
      events: ["usage.reported", "usage.corrected"],
      usagePeriod: "hourly",
    });
    const webhookId = hook.webhookId as string;
    await call("identities.createIdentity", {
      externalId: `acme_${storage}`,
      meta: { stripe_customer_id: "cus_acme" },
      credits: { remaining: 100 },
    });
    await call("identities.createIdentity", { externalId: `globex_${storage}` });
    const acme = (await call("identities.getIdentity", { identity: `acme_${storage}` })).id as string;
    const globex = (await call("identities.getIdentity", { identity: `globex_${storage}` })).id as string;
    const acmeKey = await call("keys.createKey", { apiId: API, externalId: `acme_${storage}` });
    const globexKey = await call("keys.createKey", { apiId: API, externalId: `globex_${storage}` });
    const loneKey = await call("keys.createKey", { apiId: API, meta: { stripe_customer_id: "cus_lone" }, credits: { remaining: 10 } });
    const verify = async (key: { key: string }, times: number) => {
      for (let n = 0; n < times; n++) await call("keys.verifyKey", { key: key.key });
    };

    // Hour 0: acme 3, globex 1; hour 1: lone 2; hour 2: nobody; hour 3: acme 1.
    clock.set(start + 10 * MINUTE);
    await verify(acmeKey, 3);
    await verify(globexKey, 1);
    clock.set(start + HOUR + 30_000);
    await verify(loneKey, 2);
    t.same(await pass(), { reports: 0, corrections: 0 }, "hour 0 has closed, but not its delay");
    clock.set(start + HOUR + DELAY);
    t.same(await pass(), { reports: 2, corrections: 0 }, "hour 0 once its delay is over: acme and globex");
    t.same(await pass(), { reports: 0, corrections: 0 }, "made once, however often the reporter runs");
    clock.set(start + 3 * HOUR + 20 * MINUTE);
    await verify(acmeKey, 1);
    clock.set(start + 4 * HOUR + DELAY);
    t.same(await pass(), { reports: 2, corrections: 0 }, "hours 1 to 3 at once: lone in hour 1, nobody in hour 2, acme in hour 3");

    // Within a period, subjects come in the order of their ids.
    const reported = cloudEvents(receiver, "usage.reported");
    t.equal(reported.length, 4, "four reports delivered");
    t.same(
      reported.map((each) => each.data.period.start),
      [start, start, start + HOUR, start + 3 * HOUR],
      "periods in order",
    );
    const subjectOrder = (each: CloudEvent) => (each.data.identity?.id ?? each.data.key?.id) as string;
    t.ok(subjectOrder(reported[0] as CloudEvent) < subjectOrder(reported[1] as CloudEvent), "subjects of a period by id");
    const secret = hook.secret as string;
    t.ok(
      receiver.received.every((each) => verifySignature(secret, each.headers, each.body)),
      "each signed by the endpoint's secret",
    );
    t.ok(
      receiver.received.every((each) => each.headers["webhook-id"] === (JSON.parse(each.body) as CloudEvent).id),
      "webhook-id is the event's id",
    );
    const usageOf = async (scope: Record<string, string>, hour: number) =>
      (await call("keygate.getUsage", { ...scope, granularity: "hourly", start: start + hour * HOUR, end: start + (hour + 1) * HOUR }))
        .buckets[0];
    const expected = [
      {
        hour: 0,
        subject: `acme_${storage}`,
        ref: { kind: "identity", identityId: acme, externalId: `acme_${storage}` },
        scope: { identity: acme },
      },
      {
        hour: 0,
        subject: `globex_${storage}`,
        ref: { kind: "identity", identityId: globex, externalId: `globex_${storage}` },
        scope: { identity: globex },
      },
      { hour: 1, subject: loneKey.keyId, ref: { kind: "key", keyId: loneKey.keyId, keySpaceId: "" }, scope: { keyId: loneKey.keyId } },
      {
        hour: 3,
        subject: `acme_${storage}`,
        ref: { kind: "identity", identityId: acme, externalId: `acme_${storage}` },
        scope: { identity: acme },
      },
    ] as const;
    const acmeHour0 = reported.find((each) => each.data.identity?.id === acme && each.data.period.start === start) as CloudEvent;
    for (const [index, want] of expected.entries()) {
      const got = reported.find(
        (each) => each.subject === want.subject && each.data.period.start === start + want.hour * HOUR,
      ) as CloudEvent;
      const period = { granularity: "hourly" as const, start: start + want.hour * HOUR, end: start + (want.hour + 1) * HOUR };
      const bucket = await usageOf(want.scope, want.hour);
      t.match(
        got,
        {
          specversion: "1.0",
          id: reportId(webhookId, want.ref, period),
          source: `keygate/${workspace}`,
          type: "usage.reported",
          subject: want.subject,
          time: new Date(period.start).toISOString(),
          datacontenttype: "application/json",
        },
        `report ${index}: the CloudEvents envelope, its id derived from endpoint, subject and period`,
      );
      t.same(
        { requests: got.data.requests, outcomes: got.data.outcomes, credits: got.data.credits },
        { requests: bucket.requests, outcomes: bucket.outcomes, credits: bucket.credits },
        `report ${index}: the numbers getUsage answers for the subject's hour`,
      );
      t.same(got.data.period, period, `report ${index}: its period`);
    }
    t.same(
      acmeHour0.data.identity,
      { id: acme, externalId: `acme_${storage}`, meta: { stripe_customer_id: "cus_acme" } },
      "the identity with its meta",
    );
    t.same(acmeHour0.data.credits, { total: 3, key: 0, identity: 3 }, "acme paid from the identity's balance");
    t.same(
      reported[2]?.data.key,
      { id: loneKey.keyId, apiId: API, meta: { stripe_customer_id: "cus_lone" } },
      "a key without identity, with its meta",
    );
    t.same(reported[2]?.data.credits, { total: 2, key: 2, identity: 0 });

    // A late batch: a verification of acme in hour 0, written only now (an instance whose engine was away).
    const ksId = (await h.app.stores.apis.get(workspace, API))?.keySpaceId as string;
    h.app.analytics.sinks.verifications.record(
      event({
        workspaceId: workspace,
        time: start + 30 * MINUTE,
        keySpaceId: ksId,
        keyId: acmeKey.keyId,
        identityId: acme,
        externalId: `acme_${storage}`,
        spentCredits: 1,
        creditsSource: "identity",
      }),
    );
    clock.set(start + 5 * HOUR + DELAY);
    t.same(await pass(), { reports: 0, corrections: 1 }, "hour 4 had no usage; hour 0 of acme is corrected");
    const [correction] = cloudEvents(receiver, "usage.corrected");
    t.match(correction?.data, {
      corrects: acmeHour0.id,
      period: { start, end: start + HOUR },
      requests: 4,
      credits: { total: 4, key: 0, identity: 4 },
      previous: { requests: 3, credits: { total: 3 } },
      change: { requests: 1, outcomes: { VALID: 1 }, credits: { total: 1, key: 0, identity: 1 } },
    });
    t.not(correction?.id, acmeHour0.id, "a correction has its own id");
    clock.set(start + 6 * HOUR + DELAY);
    t.same(await pass(), { reports: 0, corrections: 0 }, "corrected once");

    // Replay hours 0 to 3: the same ids, hour 0 with the numbers analytics holds now.
    const before = receiver.received.length;
    const replayed = await call("keygate.replayUsageReports", { webhookId, start, end: start + 4 * HOUR });
    t.same(replayed, { periods: 4, reports: 4 });
    while ((await h.app.services.webhooks.deliverer.deliverDue()) > 0);
    const again = receiver.received.slice(before).map((each) => JSON.parse(each.body) as CloudEvent);
    t.same(
      again.map((each) => each.id),
      reported.map((each) => each.id),
      "a replay sends the ids the reports were sent with",
    );
    t.equal(again.find((each) => each.id === acmeHour0.id)?.data.requests, 4, "with the numbers as they are now");

    // Refusals.
    const refusals: [string, Record<string, unknown>, number, RegExp][] = [
      ["a period not closed yet", { webhookId, start, end: clock.now() }, 400, /not closed/],
      ["an end before the start", { webhookId, start, end: start }, 400, /greater than start/],
      ["too many periods", { webhookId, start: start - 40 * 24 * HOUR, end: start }, 400, /at most 744/],
      ["an unknown endpoint", { webhookId: "wh_nope", start, end: start + HOUR }, 404, /does not exist/],
    ];
    for (const [label, body, status, detail] of refusals) {
      const refused = await h.call("keygate.replayUsageReports", body, { rootKey: root });
      t.equal(refused.status, status, label);
      t.match(JSON.stringify(refused.body.error), detail, `${label}: why`);
    }
    const other = await h.rootKey(["*"], OTHER_WORKSPACE);
    t.equal(
      (await h.call("keygate.replayUsageReports", { webhookId, start, end: start + HOUR }, { rootKey: other })).status,
      404,
      "another workspace's endpoint does not exist for the caller",
    );
    const reader = await h.rootKey(["webhook.*.read_webhook"], workspace);
    t.equal(
      (await h.call("keygate.replayUsageReports", { webhookId, start, end: start + HOUR }, { rootKey: reader })).status,
      403,
      "replaying needs update_webhook",
    );
    const plain = await call("keygate.createWebhook", { url: receiver.url, events: ["key.created"] });
    const unsubscribed = await h.call(
      "keygate.replayUsageReports",
      { webhookId: plain.webhookId, start, end: start + HOUR },
      { rootKey: root },
    );
    t.equal(unsubscribed.status, 400, "an endpoint that does not take usage.reported");
    t.match(unsubscribed.body.error.errors[0], { location: "body.webhookId", message: /does not subscribe to usage\.reported/ });
  });
}

t.test(
  "one producer at a time; one that dies after the outbox has a period's events leaves it to the next, with the same ids",
  async (t) => {
    const workspace = "ws_reports_lease";
    const { start, clock, receiver, h, call } = await setup(t, "redis", workspace);
    const hook = await call("keygate.createWebhook", { url: receiver.url, events: ["usage.reported"], usagePeriod: "daily" });
    const key = await call("keys.createKey", { apiId: `api_${workspace}`, externalId: "lease_customer" });
    clock.set(start + 5 * MINUTE);
    await call("keys.verifyKey", { key: key.key });
    await h.app.analytics.flush();
    const day = Math.floor(start / (24 * HOUR)) * 24 * HOUR;
    clock.set(day + 24 * HOUR + DELAY);

    const stores = h.app.stores;
    const services = h.app.services.webhooks;
    const failures: unknown[] = [];
    const reporter = (owner: string, outbox: UsageReporterDeps["outbox"] = services.dispatcher) =>
      new UsageReporter({
        engine: h.app.analytics.engine,
        webhooks: stores.webhooks,
        identities: stores.identities,
        keys: stores.keys,
        progress: stores.usageReports,
        outbox,
        clock,
        owner,
        settings: { delayMs: DELAY, leaseMs: 2 * MINUTE, correctionWindowMs: 0, maxPeriodsPerPass: 24, rawRetentionDays: 90 },
        onError: (error) => failures.push(error),
      });
    // Instance A puts the day's report in the outbox and dies before it can say the day is done.
    const dying = reporter("instance_a", {
      enqueuePrepared: async (endpoint, events) => {
        await services.dispatcher.enqueuePrepared(endpoint, events);
        throw new Error("killed after the outbox write");
      },
    });
    t.same(await dying.produce(), { reports: 0, corrections: 0 }, "nothing made, as far as A knows");
    t.match(failures, [{ message: "killed after the outbox write" }], "the endpoint's failure is reported, not thrown");
    t.equal(await stores.usageReports.progress(hook.webhookId), null, "the day is not marked done");
    t.same(await reporter("instance_b").produce(), { reports: 0, corrections: 0 }, "B waits while A's lease runs");
    clock.advance(2 * MINUTE);
    t.same(await reporter("instance_b").produce(), { reports: 1, corrections: 0 }, "once it ran out, B makes the day's report");
    t.same(await reporter("instance_b").produce(), { reports: 0, corrections: 0 }, "and marks it done");
    while ((await services.deliverer.deliverDue()) > 0);
    const ids = cloudEvents(receiver, "usage.reported").map((each) => each.id);
    t.equal(ids.length, 2, "the day's report went out twice");
    t.equal(new Set(ids).size, 1, "under one id: a receiver that deduplicates on webhook-id bills it once");
    const deliveries = await call("keygate.listWebhookDeliveries", { webhookId: hook.webhookId, limit: 10 });
    t.equal(deliveries.length, 1, "one delivery record for the report");
  },
);

t.test("subscribing to usage events needs analytics; the period is set and shown", async (t) => {
  const off = await harness(t, { config: { webhooks: { allowPrivateAddresses: true } } });
  const refused = await off.call("keygate.createWebhook", { url: "http://127.0.0.1:9/hook", events: ["usage.reported"] });
  t.equal(refused.status, 412);
  t.match(refused.body.error.type, /analytics_not_configured$/);
  const plain = await off.call("keygate.createWebhook", { url: "http://127.0.0.1:9/hook", events: ["key.created"] });
  t.equal(plain.status, 200, "other events need no analytics");
  const update = await off.call("keygate.updateWebhook", { webhookId: plain.body.data.webhookId, events: ["usage.corrected"] });
  t.equal(update.status, 412, "nor can an update add them");

  const { call, receiver } = await setup(t, "memory", "ws_reports_fields");
  const hourly = await call("keygate.createWebhook", { url: receiver.url, events: ["usage.reported"] });
  const listed = await call("keygate.listWebhooks", {});
  t.equal(listed.find((each: { webhookId: string }) => each.webhookId === hourly.webhookId)?.usagePeriod, "hourly", "hourly by default");
  const daily = await call("keygate.updateWebhook", { webhookId: hourly.webhookId, usagePeriod: "daily" });
  t.equal(daily.usagePeriod, "daily");
  const none = await call("keygate.createWebhook", { url: receiver.url, events: ["key.created"] });
  t.equal(
    (await call("keygate.listWebhooks", {})).find((each: { webhookId: string }) => each.webhookId === none.webhookId)?.usagePeriod,
    undefined,
    "no period for an endpoint without usage events",
  );
});
