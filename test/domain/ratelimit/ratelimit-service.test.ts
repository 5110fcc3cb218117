import t from "tap";
import type { KeygateError } from "../../../src/errors/keygate-error.js";
import { ManualClock } from "../../helpers/clock.js";
import { harness, WORKSPACE } from "../../helpers/harness.js";

/** RatelimitService.check: the core the gateway calls, without root keys. */
t.test("check applies namespace limits with overrides, all-or-nothing, without a root key", async (t) => {
  const clock = new ManualClock(5_000 * 60_000);
  const h = await harness(t, { clock });
  const ratelimit = h.app.services.ratelimit;
  const request = (namespace: string, identifier: string, limit: number, cost?: number) => ({
    namespace,
    identifier,
    limit,
    durationMs: 60_000,
    ...(cost === undefined ? {} : { cost }),
  });

  await t.test("an unknown namespace is 404 unless the caller asks to create it", async (t) => {
    const error = await ratelimit
      .check(WORKSPACE, [request("gateway", "1.2.3.4", 2)], { createMissingNamespaces: false })
      .catch((failure: unknown) => failure);
    t.equal((error as KeygateError).code, "err:unkey:data:ratelimit_namespace_not_found");
    const outcome = await ratelimit.check(WORKSPACE, [request("gateway", "1.2.3.4", 2)], { createMissingNamespaces: true });
    const namespace = await h.app.stores.ratelimitNamespaces.findNamespaceByName(WORKSPACE, "gateway");
    t.same(outcome, {
      passed: true,
      results: [
        {
          namespace: "gateway",
          namespaceId: namespace?.id,
          identifier: "1.2.3.4",
          limit: 2,
          durationMs: 60_000,
          remaining: 1,
          resetAt: 5_001 * 60_000,
          passed: true,
        },
      ],
    });
    t.equal(
      (await ratelimit.check(WORKSPACE, [request("gateway", "1.2.3.4", 2)], { createMissingNamespaces: false })).results[0]?.remaining,
      0,
      "once it exists",
    );
  });

  await t.test("overrides apply and are reported", async (t) => {
    await h.call("ratelimit.setOverride", { namespace: "gateway", identifier: "10.*", limit: 100, duration: 1_000 });
    const outcome = await ratelimit.check(WORKSPACE, [request("gateway", "10.0.0.1", 2)], { createMissingNamespaces: false });
    t.match(outcome.results[0], { limit: 100, durationMs: 1_000, remaining: 99, overrideId: /^rlor_/ });
  });

  await t.test("several requests are all-or-nothing", async (t) => {
    const outcome = await ratelimit.check(WORKSPACE, [request("gateway", "5.6.7.8", 10), request("gateway", "1.2.3.4", 2)], {
      createMissingNamespaces: false,
    });
    t.same([outcome.passed, ...outcome.results.map((result) => [result.passed, result.remaining])], [false, [true, 10], [false, 0]]);
  });

  await t.test("a deleted namespace is 410", async (t) => {
    await ratelimit.deleteNamespace(WORKSPACE, "gateway");
    const error = await ratelimit
      .check(WORKSPACE, [request("gateway", "1.2.3.4", 2)], { createMissingNamespaces: true })
      .catch((failure: unknown) => failure);
    t.equal((error as KeygateError).code, "err:unkey:data:ratelimit_namespace_gone");
  });
});
