import type { AddressInfo } from "node:net";
import { createServer, type Server, type Socket } from "node:net";
import t, { type Test } from "tap";
import { analyticsDir } from "../helpers/analytics.js";
import { ManualClock } from "../helpers/clock.js";
import { type Harness, harness, STORAGE_KINDS } from "../helpers/harness.js";
import { freePorts } from "../helpers/ports.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";
import { Receiver } from "../helpers/webhook-receiver.js";

/**
 * Credits the gateway gives back (the upstream never answered) are not usage: requests through gateway routes
 * whose upstreams answer, close the connection or refuse it, over several hours on an injected clock; getUsage's
 * credits, bucket by bucket and balance by balance, equal what left each balance (read from the balances
 * themselves), and so do the reports. A refund made after its period was reported is sent as usage.corrected.
 */

const HOUR = 3_600_000;
const MINUTE = 60_000;
/** analytics.buffer.flushIntervalMs (5 s by default) plus the margin of a minute. */
const DELAY = 65_000;
/** What every route charges: 2, so that a refund cannot be mistaken for a request's absence. */
const COST = 2;

// chDB binds one data directory per process: both stores' apps use this one, each in a workspace of its own.
const dir = analyticsDir(t);

/** An upstream that accepts connections and closes each one, at once or when told (`closeHeld`). */
async function closingUpstream(t: Test, hold: boolean): Promise<{ url: string; held: Socket[]; closeHeld(): void }> {
  const held: Socket[] = [];
  const server: Server = createServer((socket) => {
    if (!hold) return void socket.destroy();
    // Reads the request and never answers, until closeHeld().
    socket.resume();
    held.push(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of held) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    held,
    closeHeld: () => {
      for (const socket of held.splice(0)) socket.destroy();
    },
  };
}

interface Credits {
  total: number;
  key: number;
  identity: number;
}

interface CloudEvent {
  id: string;
  type: string;
  subject: string;
  data: Record<string, any>;
}

for (const storage of STORAGE_KINDS) {
  t.test(`usage counts what left the balances when the gateway refunds credits (${storage} stores)`, async (t) => {
    const workspace = `ws_usage_refunds_${storage}`;
    const API = `api_usage_refunds_${storage}`;
    // Eight hours ago, on the hour: every row is within the tables' retention, and the hours are whole.
    const start = Math.floor(Date.now() / HOUR) * HOUR - 8 * HOUR;
    const clock = new ManualClock(start);
    const answering = await startUpstream(t);
    const closing = await closingUpstream(t, false);
    const holding = await closingUpstream(t, true);
    // A port that was free a moment ago and that nothing listens on: connections to it are refused.
    const [refusedPort] = await freePorts(1);
    const receiver = new Receiver();
    await receiver.start();
    t.teardown(() => receiver.stop());
    const route = (name: string, upstream: string) => ({
      name: `${name}_${storage}`,
      match: { prefix: `/${storage}/${name}` },
      upstream,
      apiId: API,
      credits: { cost: COST },
    });
    const h: Harness = await harness(t, {
      storage,
      clock,
      config: {
        apis: [{ id: API, name: "usage-refunds", workspaceId: workspace }],
        routes: [
          route("answering", answering.url),
          route("closing", closing.url),
          route("refused", `http://127.0.0.1:${refusedPort}`),
          route("holding", holding.url),
        ],
        analytics: { engine: "embedded", path: dir },
        // The test runs the reporter and the deliverer itself.
        webhooks: { deliver: false, allowPrivateAddresses: true },
      },
    });
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}/${storage}`;
    const root = await h.rootKey(["*"], workspace);
    const call = async (procedure: string, body: unknown) => {
      const response = await h.call(procedure, body, { rootKey: root });
      t.equal(response.status, 200, `${procedure}: ${JSON.stringify(response.body)}`);
      return response.body.data;
    };
    const hook = await call("keygate.createWebhook", {
      url: receiver.url,
      events: ["usage.reported", "usage.corrected"],
      usagePeriod: "hourly",
    });
    await call("identities.createIdentity", { externalId: `acme_${storage}`, credits: { remaining: 100 } });
    const acme = (await call("identities.getIdentity", { identity: `acme_${storage}` })).id as string;
    const keys = {
      // Pays from acme's balance.
      shared: await call("keys.createKey", { apiId: API, externalId: `acme_${storage}` }),
      // Pays from its own balance although acme has one.
      own: await call("keys.createKey", { apiId: API, externalId: `acme_${storage}`, credits: { remaining: 100 } }),
      // No identity, its own balance.
      lone: await call("keys.createKey", { apiId: API, credits: { remaining: 100 } }),
    };

    /** Every balance as it stands: the key's own ones and acme's. */
    const balances = async () => ({
      own: (await call("keys.getKey", { keyId: keys.own.keyId })).credits.remaining as number,
      lone: (await call("keys.getKey", { keyId: keys.lone.keyId })).credits.remaining as number,
      acme: (await call("identities.getIdentity", { identity: acme })).credits.remaining as number,
    });
    type Balances = Awaited<ReturnType<typeof balances>>;
    const statuses = new Map<string, number>();
    const request = async (key: keyof typeof keys, path: string) => {
      const response = await fetch(`${base}/${path}`, { headers: { authorization: `Bearer ${keys[key].key}` } });
      await response.arrayBuffer();
      statuses.set(`${path}:${response.status}`, (statuses.get(`${path}:${response.status}`) ?? 0) + 1);
      return response.status;
    };

    // Each hour: some requests answered, some whose upstream closed the connection, some refused; a different mix
    // for each key and hour. What each balance lost in the hour is read from the balances.
    const hours: { requests: { shared: number; own: number; lone: number }; spent: Balances; answered: Balances }[] = [];
    for (let hour = 0; hour < 4; hour++) {
      clock.set(start + hour * HOUR + 5 * MINUTE);
      const before = await balances();
      const requests = { shared: 0, own: 0, lone: 0 };
      const answered = { own: 0, lone: 0, acme: 0 };
      for (const key of ["shared", "own", "lone"] as const) {
        const mix = [
          ...Array<string>(1 + ((hour + key.length) % 3)).fill("answering/ok"),
          ...Array<string>(hour % 2).fill("closing/x"),
          ...Array<string>(1 + ((hour * key.length) % 2)).fill("refused/x"),
        ];
        for (const path of mix) {
          clock.advance(MINUTE);
          const status = await request(key, path);
          requests[key] += 1;
          if (status === 200) answered[key === "shared" ? "acme" : key] += COST;
          else t.ok(status >= 500, `${key}, ${path}: a gateway failure (${status})`);
        }
      }
      const after = await balances();
      hours.push({
        requests,
        spent: { own: before.own - after.own, lone: before.lone - after.lone, acme: before.acme - after.acme },
        answered,
      });
    }
    const failed = (path: string) => [...statuses.keys()].some((name) => name.startsWith(`${path}:5`));
    t.ok(failed("closing/x") && failed("refused/x"), `upstreams closed and refused connections: ${JSON.stringify([...statuses])}`);
    for (const [hour, { spent, answered }] of hours.entries()) {
      t.same(spent, answered, `hour ${hour}: the balances lost the credits of answered requests only`);
    }

    // The first four hours' reports, then getUsage: the same net numbers.
    clock.set(start + 4 * HOUR + DELAY);
    await h.app.analytics.flush();
    const produced = await h.app.services.webhooks.usageReporter.produce();
    while ((await h.app.services.webhooks.deliverer.deliverDue()) > 0);
    t.same(produced, { reports: 8, corrections: 0 }, "acme and the lone key in each of four hours");
    const events = () => receiver.received.map((each) => JSON.parse(each.body) as CloudEvent);
    const usage = async (scope: Record<string, string>, from: number, hoursLong: number) =>
      (await call("keygate.getUsage", { ...scope, granularity: "hourly", start: from, end: from + hoursLong * HOUR })).buckets as {
        start: number;
        requests: number;
        outcomes: Record<string, number>;
        credits: Credits;
      }[];
    const credits = (key: number, identity: number): Credits => ({ total: key + identity, key, identity });

    const scopes: [
      string,
      Record<string, string>,
      (spent: Balances) => Credits,
      (requests: (typeof hours)[number]["requests"]) => number,
    ][] = [
      ["the workspace", {}, (spent) => credits(spent.own + spent.lone, spent.acme), (n) => n.shared + n.own + n.lone],
      ["the API", { apiId: API }, (spent) => credits(spent.own + spent.lone, spent.acme), (n) => n.shared + n.own + n.lone],
      ["acme", { identity: acme }, (spent) => credits(spent.own, spent.acme), (n) => n.shared + n.own],
      ["the key paying from acme's balance", { keyId: keys.shared.keyId }, (spent) => credits(0, spent.acme), (n) => n.shared],
      ["the lone key", { keyId: keys.lone.keyId }, (spent) => credits(spent.lone, 0), (n) => n.lone],
    ];
    for (const [label, scope, spentIn, requestsIn] of scopes) {
      const buckets = await usage(scope, start, 4);
      for (const [hour, { spent, requests }] of hours.entries()) {
        const bucket = buckets[hour];
        t.same(bucket?.credits, spentIn(spent), `${label}, hour ${hour}: the credits that left the balances`);
        // A refunded request was verified, and counts as a request of its outcome (docs/usage.md#refunds).
        t.same(
          [bucket?.requests, bucket?.outcomes.VALID],
          [requestsIn(requests), requestsIn(requests)],
          `${label}, hour ${hour}: every request, refunded or not, a VALID verification`,
        );
      }
    }
    // Days and calendar months: the same net credits, whichever buckets the hours fall in.
    const spentInAll = hours.reduce((sum, { spent }) => sum + spent.own + spent.lone + spent.acme, 0);
    for (const granularity of ["daily", "monthly"]) {
      const { totals } = await call("keygate.getUsage", { granularity, start, end: start + 4 * HOUR });
      t.equal(totals.credits.total, spentInAll, `${granularity}: the credits that left the balances in all`);
    }
    for (const [hour, { spent }] of hours.entries()) {
      const periodStart = start + hour * HOUR;
      const ofHour = events().filter((each) => each.type === "usage.reported" && each.data.period.start === periodStart);
      t.same(
        ofHour.find((each) => each.data.identity?.id === acme)?.data.credits,
        credits(spent.own, spent.acme),
        `hour ${hour}: acme's report says what left its balances`,
      );
      t.same(
        ofHour.find((each) => each.data.key?.id === keys.lone.keyId)?.data.credits,
        credits(spent.lone, 0),
        `hour ${hour}: the lone key's report says what left its balance`,
      );
    }

    // A refund after its period was reported: a request of hour 4 is held by its upstream while hour 4 is reported,
    // then its connection closes. The refund belongs to hour 4 and reaches it as a correction.
    clock.set(start + 4 * HOUR + 30 * MINUTE);
    const acmeBefore = (await balances()).acme;
    const late = request("shared", "holding/x");
    await waitFor("the upstream holds the request", 10_000, () => (holding.held.length === 1 ? true : undefined));
    t.equal((await balances()).acme, acmeBefore - COST, "the held request's credits are spent while it is held");
    clock.set(start + 5 * HOUR + DELAY);
    await h.app.analytics.flush();
    t.same(await h.app.services.webhooks.usageReporter.produce(), { reports: 1, corrections: 0 }, "hour 4 reported");
    holding.closeHeld();
    t.ok((await late) >= 500, "the held request fails once its upstream closes the connection");
    t.equal((await balances()).acme, acmeBefore, "and its credits are back");
    clock.set(start + 6 * HOUR + DELAY);
    await h.app.analytics.flush();
    t.same(
      await h.app.services.webhooks.usageReporter.produce(),
      { reports: 0, corrections: 1 },
      "hour 5 reported (nobody used anything), and hour 4 corrected",
    );
    while ((await h.app.services.webhooks.deliverer.deliverDue()) > 0);
    const hour4 = start + 4 * HOUR;
    const report = events().find((each) => each.type === "usage.reported" && each.data.period.start === hour4);
    const correction = events().find((each) => each.type === "usage.corrected");
    t.same(report?.data.credits, credits(0, COST), "hour 4's report counted the held request's credits as spent");
    t.match(
      correction,
      {
        subject: `acme_${storage}`,
        data: {
          webhookId: hook.webhookId,
          corrects: report?.id,
          period: { start: hour4, end: hour4 + HOUR },
          requests: 1,
          credits: credits(0, 0),
          previous: { requests: 1, credits: credits(0, COST) },
          change: { requests: 0, credits: credits(0, -COST) },
        },
      },
      "the correction gives the credits back to hour 4: still one request, nothing spent",
    );
    const [hour4Usage] = await usage({ identity: acme }, hour4, 1);
    t.same([hour4Usage?.requests, hour4Usage?.credits], [1, credits(0, 0)], "getUsage for hour 4 agrees");

    // A replay sends hour 4 with its first id and the numbers as they are now: nothing spent.
    const sent = receiver.received.length;
    t.same(await call("keygate.replayUsageReports", { webhookId: hook.webhookId, start: hour4, end: hour4 + HOUR }), {
      periods: 1,
      reports: 1,
    });
    while ((await h.app.services.webhooks.deliverer.deliverDue()) > 0);
    const [replayed] = receiver.received.slice(sent).map((each) => JSON.parse(each.body) as CloudEvent);
    t.same([replayed?.id, replayed?.data.credits], [report?.id, credits(0, 0)], "the replay: the report's id, the net credits");

    // A refund whose verification never reached the table (lost before a flush) takes nothing off: usage never
    // counted those credits.
    h.app.analytics.sinks.creditRefunds.record({
      requestId: "req_never_recorded",
      time: start + 10 * MINUTE,
      refundedAt: start + 11 * MINUTE,
      workspaceId: workspace,
      keySpaceId: "",
      keyId: keys.lone.keyId,
      identityId: "",
      externalId: "",
      credits: 5,
      creditsSource: "key",
    });
    await h.app.analytics.flush();
    const [hour0] = await usage({ keyId: keys.lone.keyId }, start, 1);
    t.same(hour0?.credits, credits((hours[0] as (typeof hours)[number]).spent.lone, 0), "the lone key's hour 0 is as it was");
  });
}
