import t, { type Test } from "tap";
import type { RatelimitEvent } from "../../../src/domain/analytics/events.js";
import { recordingAnalytics } from "../../helpers/analytics.js";
import { assertError, assertInvalidAt } from "../../helpers/assertions.js";
import { LONGEST_WINDOW_MS, ManualClock } from "../../helpers/clock.js";
import { type CallResult, type Harness, harness, STORAGE_KINDS, WORKSPACE } from "../../helpers/harness.js";
import { privateRedis } from "../../helpers/redis-server.js";

const DURATION = 60_000;
const WINDOW_START = 50_000_000 * DURATION;
const RESET = WINDOW_START + DURATION;

async function namespaceId(h: Harness, name: string): Promise<string> {
  const namespace = await h.app.stores.ratelimitNamespaces.findNamespaceByName(WORKSPACE, name);
  if (!namespace) throw new Error(`no namespace ${name}`);
  return namespace.id;
}

/** The events recorded since `from`, latency checked and left out (it is measured, not known in advance). */
function recordedSince(t: Test, events: readonly RatelimitEvent[], from: number): Omit<RatelimitEvent, "latencyMs">[] {
  return events.slice(from).map(({ latencyMs, ...event }) => {
    t.ok(Number.isFinite(latencyMs) && latencyMs >= 0, `latencyMs is a duration (${latencyMs})`);
    return event;
  });
}

for (const storage of STORAGE_KINDS) {
  t.test(`every decision of ratelimit.limit and multiLimit is one event per check, on ${storage} stores`, async (t) => {
    const events: RatelimitEvent[] = [];
    const h = await harness(t, { storage, clock: new ManualClock(WINDOW_START), analytics: recordingAnalytics({ ratelimits: events }) });
    let serial = 0;
    const fresh = (label: string) => `${label}-${++serial}`;

    await t.test("ratelimit.limit: each call is recorded as answered, under the response's request id", async (t) => {
      const identifier = fresh("user");
      const from = events.length;
      const answers: CallResult[] = [];
      for (let i = 0; i < 3; i++) {
        answers.push(await h.call("ratelimit.limit", { namespace: "events", identifier, limit: 5, duration: DURATION, cost: 2 }));
      }
      t.same(
        answers.map((answer) => answer.body.data),
        [
          { limit: 5, remaining: 3, reset: RESET, success: true },
          { limit: 5, remaining: 1, reset: RESET, success: true },
          { limit: 5, remaining: 1, reset: RESET, success: false },
        ],
      );
      const id = await namespaceId(h, "events");
      t.match(id, /^rlns_/);
      t.same(
        recordedSince(t, events, from),
        answers.map((answer) => ({
          requestId: answer.body.meta.requestId,
          time: WINDOW_START,
          workspaceId: WORKSPACE,
          namespaceId: id,
          identifier,
          passed: answer.body.data.success,
          overrideId: "",
          limit: answer.body.data.limit,
          remaining: answer.body.data.remaining,
          resetAt: answer.body.data.reset,
          tokens: 2,
        })),
      );
    });

    await t.test("the cost defaults to 1 token; an override's id and limit are recorded when it matched", async (t) => {
      const identifier = fresh("vip");
      await h.call("ratelimit.limit", { namespace: "events", identifier: "warm-up", limit: 1, duration: DURATION });
      const set = await h.call("ratelimit.setOverride", { namespace: "events", identifier, limit: 50, duration: DURATION });
      t.equal(set.status, 200);
      const from = events.length;
      const answer = await h.call("ratelimit.limit", { namespace: "events", identifier, limit: 1, duration: DURATION });
      t.same(answer.body.data, { limit: 50, remaining: 49, reset: RESET, success: true, overrideId: set.body.data.overrideId });
      t.match(recordedSince(t, events, from), [
        { requestId: answer.body.meta.requestId, identifier, passed: true, overrideId: set.body.data.overrideId, limit: 50, tokens: 1 },
      ]);
      t.equal(events.length, from + 1);
    });

    await t.test("multiLimit: one event per check under one request id, each passed as the limiter reported it", async (t) => {
      const user = fresh("user");
      const batch = [
        { namespace: "requests", identifier: user, limit: 10, duration: DURATION },
        { namespace: "tokens", identifier: user, limit: 1_000, duration: DURATION, cost: 250 },
        { namespace: "daily", identifier: user, limit: 1, duration: DURATION },
      ];
      const from = events.length;
      const passed = await h.call("ratelimit.multiLimit", batch);
      const failed = await h.call("ratelimit.multiLimit", batch);
      t.same(
        [passed.body.data.passed, failed.body.data.passed],
        [true, false],
        "the second batch fails on daily, and consumes none of its checks",
      );
      const ids = [await namespaceId(h, "requests"), await namespaceId(h, "tokens"), await namespaceId(h, "daily")];
      const expected = (answer: CallResult) =>
        answer.body.data.limits.map(
          (limit: { identifier: string; limit: number; remaining: number; reset: number; passed: boolean }, index: number) => ({
            requestId: answer.body.meta.requestId,
            time: WINDOW_START,
            workspaceId: WORKSPACE,
            namespaceId: ids[index],
            identifier: limit.identifier,
            passed: limit.passed,
            overrideId: "",
            limit: limit.limit,
            remaining: limit.remaining,
            resetAt: limit.reset,
            tokens: [1, 250, 1][index],
          }),
        );
      t.same(recordedSince(t, events, from), [...expected(passed), ...expected(failed)]);
      t.same(
        events.slice(from + 3).map((event) => [event.passed, event.remaining]),
        [
          [true, 9],
          [true, 750],
          [false, 0],
        ],
        "the checks that would have passed are recorded as passed, with what really remains",
      );
    });

    await t.test("a request refused before the counters decided records nothing", async (t) => {
      const from = events.length;
      const noRatelimit = await h.rootKey(["api.*.read_key"]);
      assertError(
        t,
        await h.call("ratelimit.limit", { namespace: "events", identifier: "x", limit: 1, duration: DURATION }, { rootKey: noRatelimit }),
        "err:unkey:authorization:insufficient_permissions",
      );
      assertError(
        t,
        await h.call("ratelimit.multiLimit", [{ namespace: "events", identifier: "x", limit: 1, duration: DURATION }], {
          rootKey: noRatelimit,
        }),
        "err:unkey:authorization:insufficient_permissions",
      );
      assertError(
        t,
        await h.call("ratelimit.limit", { namespace: "rlns_doesnotexist", identifier: "x", limit: 1, duration: DURATION }),
        "err:unkey:data:ratelimit_namespace_not_found",
      );
      await h.call("ratelimit.limit", { namespace: "doomed", identifier: "x", limit: 1, duration: DURATION });
      await h.app.services.ratelimit.deleteNamespace(WORKSPACE, "doomed");
      const afterDoomed = events.length;
      assertError(
        t,
        await h.call("ratelimit.limit", { namespace: "doomed", identifier: "x", limit: 1, duration: DURATION }),
        "err:unkey:data:ratelimit_namespace_gone",
      );
      assertError(
        t,
        await h.call("ratelimit.multiLimit", [
          { namespace: "events", identifier: "x", limit: 1, duration: DURATION },
          { namespace: "doomed", identifier: "x", limit: 1, duration: DURATION },
        ]),
        "err:unkey:data:ratelimit_namespace_gone",
      );
      assertInvalidAt(t, await h.call("ratelimit.limit", { namespace: "events", limit: 1, duration: DURATION }), "body.identifier");
      t.equal(afterDoomed, from + 1, "only the call that created 'doomed' was decided");
      t.equal(events.length, afterDoomed, "none of the refusals is an event");
    });
  });
}

t.test("answers of ratelimit.fail while Redis is down are decisions too; a refusal (closed) is none", async (t) => {
  for (const fail of ["open", "local", "closed"]) {
    await t.test(`fail: ${fail}`, async (t) => {
      const server = await privateRedis(t);
      const events: RatelimitEvent[] = [];
      const h = await harness(t, {
        storage: "redis",
        analytics: recordingAnalytics({ ratelimits: events }),
        config: {
          storage: {
            redis: {
              url: server.url,
              prefix: "kgtest:rl-events",
              commandTimeoutMs: 200,
              connectTimeoutMs: 2_000,
              breaker: { failureThreshold: 3, openMs: 60_000 },
            },
          },
          ratelimit: { fail },
        },
      });
      const limit = () => h.call("ratelimit.limit", { namespace: "outage", identifier: "during", limit: 2, duration: LONGEST_WINDOW_MS });
      t.equal((await limit()).status, 200, "the namespace exists (and is known) before the outage");
      await server.stop();
      const from = events.length;
      const answers: CallResult[] = [];
      for (let i = 0; i < 4; i++) answers.push(await limit());
      const decided = answers.filter((answer) => answer.status === 200);
      t.equal(decided.length, fail === "closed" ? 0 : 4, fail === "closed" ? "every call is refused" : "every call is answered");
      t.same(
        events.slice(from).map((event) => [event.requestId, event.passed, event.remaining]),
        decided.map((answer) => [answer.body.meta.requestId, answer.body.data.success, answer.body.data.remaining]),
        "one event per answer, as answered",
      );
      if (fail === "local")
        t.same(
          decided.map((answer) => answer.body.data.success),
          [true, true, false, false],
          "the local counters decided",
        );
    });
  }
});
