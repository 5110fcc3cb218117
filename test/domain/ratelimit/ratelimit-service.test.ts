import t from "tap";
import type { RatelimitEvent } from "../../../src/domain/analytics/events.js";
import type { KeygateError } from "../../../src/errors/keygate-error.js";
import { recordingAnalytics } from "../../helpers/analytics.js";
import { ManualClock } from "../../helpers/clock.js";
import { harness, WORKSPACE } from "../../helpers/harness.js";

/** RatelimitService.check: the core of limit and multiLimit, without root keys. */
t.test("check applies namespace limits with overrides, all-or-nothing, without a root key", async (t) => {
  const clock = new ManualClock(5_000 * 60_000);
  const events: RatelimitEvent[] = [];
  const h = await harness(t, { clock, analytics: recordingAnalytics({ ratelimits: events }) });
  const ratelimit = h.app.services.ratelimit;
  const request = (namespace: string, identifier: string, limit: number, cost?: number) => ({
    namespace,
    identifier,
    limit,
    durationMs: 60_000,
    ...(cost === undefined ? {} : { cost }),
  });
  let serial = 0;
  const check = (requests: Parameters<typeof request>[], createMissingNamespaces = false) =>
    ratelimit.check(
      WORKSPACE,
      requests.map((args) => request(...args)),
      { createMissingNamespaces, requestId: `req_check${++serial}` },
    );

  await t.test("an unknown namespace is 404 unless the caller asks to create it", async (t) => {
    const error = await check([["gateway", "1.2.3.4", 2]]).catch((failure: unknown) => failure);
    t.equal((error as KeygateError).code, "err:unkey:data:ratelimit_namespace_not_found");
    t.same(events, [], "a refusal before the counters is no decision");
    const outcome = await check([["gateway", "1.2.3.4", 2]], true);
    const namespace = await h.app.stores.ratelimitNamespaces.findNamespaceByName(WORKSPACE, "gateway");
    t.same(outcome, {
      passed: true,
      decisions: [
        {
          kind: "namespace",
          name: "gateway",
          namespaceId: namespace?.id,
          identifier: "1.2.3.4",
          check: { bucket: `ns:${namespace?.id}:1.2.3.4`, limit: 2, durationMs: 60_000, cost: 1 },
          remaining: 1,
          resetAt: 5_001 * 60_000,
          passed: true,
        },
      ],
      decidedAt: 5_000 * 60_000,
    });
    t.equal((await check([["gateway", "1.2.3.4", 2]])).decisions[0]?.remaining, 0, "once it exists");
    t.match(events, [
      {
        requestId: `req_check${serial - 1}`,
        time: 5_000 * 60_000,
        workspaceId: WORKSPACE,
        namespaceId: namespace?.id,
        identifier: "1.2.3.4",
        passed: true,
        overrideId: "",
        limit: 2,
        remaining: 1,
        resetAt: 5_001 * 60_000,
        tokens: 1,
      },
      { requestId: `req_check${serial}`, remaining: 0 },
    ]);
    t.equal(events.length, 2);
    t.ok(events.every((event) => event.latencyMs >= 0));
  });

  await t.test("overrides apply and are reported", async (t) => {
    await h.call("ratelimit.setOverride", { namespace: "gateway", identifier: "10.*", limit: 100, duration: 1_000 });
    events.length = 0;
    const outcome = await check([["gateway", "10.0.0.1", 2]]);
    t.match(outcome.decisions[0], { check: { limit: 100, durationMs: 1_000 }, remaining: 99, overrideId: /^rlor_/ });
    t.match(events, [{ identifier: "10.0.0.1", limit: 100, remaining: 99, overrideId: outcome.decisions[0]?.overrideId }]);
  });

  await t.test("several requests are all-or-nothing; each is recorded as the counters decided it", async (t) => {
    events.length = 0;
    const outcome = await check([
      ["gateway", "5.6.7.8", 10, 3],
      ["gateway", "1.2.3.4", 2],
    ]);
    t.same(
      [outcome.passed, ...outcome.decisions.map((decision) => [decision.passed, decision.remaining])],
      [false, [true, 10], [false, 0]],
    );
    t.same(
      events.map((event) => [event.requestId, event.identifier, event.passed, event.remaining, event.tokens]),
      [
        [`req_check${serial}`, "5.6.7.8", true, 10, 3],
        [`req_check${serial}`, "1.2.3.4", false, 0, 1],
      ],
    );
  });

  await t.test("a deleted namespace is 410", async (t) => {
    await ratelimit.deleteNamespace(WORKSPACE, "gateway");
    events.length = 0;
    const error = await check([["gateway", "1.2.3.4", 2]], true).catch((failure: unknown) => failure);
    t.equal((error as KeygateError).code, "err:unkey:data:ratelimit_namespace_gone");
    t.same(events, []);
  });
});
