import t from "tap";
import { validateConfig } from "../../src/config/load.js";
import { assertInvalidAt } from "../helpers/assertions.js";
import { problemsOf } from "../helpers/config.js";
import { harness } from "../helpers/harness.js";

// Pairs of settings whose values together would make a feature do nothing, silently: refused at load (and for
// routes made through the API, when written), with a message naming both fields.

const refused = (raw: Record<string, unknown>) => problemsOf(() => validateConfig(raw, "test"));
const accepted = (raw: Record<string, unknown>) => validateConfig(raw, "test");

t.test("webhooks: a lease shorter than an attempt plus a margin delivers nothing", async (t) => {
  t.same(refused({ webhooks: { leaseMs: 1_000, timeoutMs: 2_000 } }), [
    "webhooks.leaseMs: (1000) must be at least webhooks.timeoutMs (2000) plus 1000 ms: no attempt starts later than leaseMs - timeoutMs into a lease, so nothing would be delivered",
  ]);
  t.match(refused({ webhooks: { leaseMs: 10_500, timeoutMs: 10_000 } }), [
    /^webhooks\.leaseMs: \(10500\) must be at least webhooks\.timeoutMs \(10000\)/,
  ]);
  t.equal(accepted({ webhooks: { leaseMs: 11_000, timeoutMs: 10_000 } }).webhooks.leaseMs, 11_000, "an attempt and the margin fit");
  t.equal(accepted({}).webhooks.leaseMs, 30_000, "the defaults fit");
});

t.test("webhooks: retry delays against their cap, the attempt timeout and the give-up time", async (t) => {
  t.match(refused({ webhooks: { retryDelayMs: 120_000, maxRetryDelayMs: 60_000 } }), [
    /^webhooks\.retryDelayMs: \(120000\) must not be longer than webhooks\.maxRetryDelayMs \(60000\)/,
  ]);
  t.match(refused({ webhooks: { giveUpAfterMs: 5_000, timeoutMs: 5_000, retryDelayMs: 1_000 } }), [
    /^webhooks\.giveUpAfterMs: \(5000\) must be longer than webhooks\.timeoutMs \(5000\): a delivery whose first attempt timed out would be given up without a retry/,
  ]);
  t.match(refused({ webhooks: { giveUpAfterMs: 60_000, retryDelayMs: 60_000 } }), [
    /^webhooks\.retryDelayMs: \(60000\) must be shorter than webhooks\.giveUpAfterMs \(60000\): a failed delivery would be retried only once it is past its give-up time/,
  ]);
  accepted({ webhooks: { giveUpAfterMs: 60_001, retryDelayMs: 60_000, timeoutMs: 10_000 } });
});

t.test("webhooks: a key.expiring scan less often than its lead time misses keys", async (t) => {
  t.match(refused({ webhooks: { expiringScanIntervalMs: 7_200_000, expiringLeadMs: 3_600_000 } }), [
    /^webhooks\.expiringScanIntervalMs: \(7200000\) must not be longer than webhooks\.expiringLeadMs \(3600000\): a key expiring between two scans' windows would never be told of/,
  ]);
  accepted({ webhooks: { expiringScanIntervalMs: 3_600_000, expiringLeadMs: 3_600_000 } });
});

t.test("webhooks: a usage correction window shorter than the shortest period corrects nothing", async (t) => {
  t.match(refused({ webhooks: { usageCorrectionWindowMs: 1_800_000 } }), [
    /^webhooks\.usageCorrectionWindowMs: \(1800000\) must be 0 \(off\) or at least an hour, the shortest usage period/,
  ]);
  accepted({ webhooks: { usageCorrectionWindowMs: 0 } });
  accepted({ webhooks: { usageCorrectionWindowMs: 3_600_000 } });
});

t.test("analytics: the server's request timeout must outlast a query's execution limit", async (t) => {
  const clickhouse = (requestTimeoutMs: number) => ({
    analytics: { engine: "clickhouse", clickhouse: { url: "http://clickhouse:8123", requestTimeoutMs }, query: { maxExecutionMs: 10_000 } },
  });
  t.match(refused(clickhouse(10_000)), [
    /^analytics\.clickhouse\.requestTimeoutMs: \(10000\) must be longer than analytics\.query\.maxExecutionMs \(10000\)/,
  ]);
  accepted(clickhouse(10_001));
  accepted({ analytics: { engine: "embedded", clickhouse: { requestTimeoutMs: 1_000 } } });
});

t.test("storage.redis: the WAIT for replicas must fit in the command deadline", async (t) => {
  const redis = (commandTimeoutMs: number, timeoutMs?: number) => ({
    storage: {
      redis: { url: "redis://redis:6379", commandTimeoutMs, waitForReplicas: { replicas: 1, ...(timeoutMs ? { timeoutMs } : {}) } },
    },
  });
  t.match(refused(redis(500, 1_000)), [
    /^storage\.redis\.waitForReplicas\.timeoutMs: \(1000\) must be shorter than storage\.redis\.commandTimeoutMs \(500\): the WAIT for replicas is a Redis command/,
  ]);
  t.equal(accepted(redis(500)).storage.redis?.waitForReplicas?.timeoutMs, 400, "the default wait fits the default deadline");
  accepted(redis(2_000, 1_000));
});

t.test("metrics.port must not be the main port", async (t) => {
  t.match(refused({ server: { port: 9000 }, metrics: { port: 9000 } }), [/^metrics\.port: \(9000\) must differ from server\.port/]);
  accepted({ server: { port: 0 }, metrics: { port: 0 } });
});

t.test("a route's pool and limits: retries, probes and costs that could do nothing", async (t) => {
  const route = (upstream: unknown, extra: Record<string, unknown> = {}) => ({
    routes: [{ name: "r", match: { prefix: "/r" }, upstream, workspaceId: "ws_1", ...extra }],
  });
  t.match(refused(route({ targets: [{ url: "http://a:1" }], retry: { statuses: [503] } })), [
    /^routes\[0\]\.upstream\.retry: a retry goes to another target: a pool of one target is never retried/,
  ]);
  t.match(refused(route({ targets: [{ url: "http://a:1" }, { url: "http://b:1" }], retry: { attempts: 2 } })), [
    /^routes\[0\]\.upstream\.retry\.attempts: \(2\) is more than the pool's other targets \(1\)/,
  ]);
  t.match(refused(route({ targets: [{ url: "http://a:1" }], health: { active: { path: "/h", intervalMs: 1_000, timeoutMs: 1_500 } } })), [
    /^routes\[0\]\.upstream\.health\.active\.timeoutMs: \(1500\) must not be longer than health\.active\.intervalMs \(1000\)/,
  ]);
  accepted(route({ targets: [{ url: "http://a:1" }], health: { active: { path: "/h", intervalMs: 1_000 } } }));
  t.match(refused(route("http://a:1", { namespaceLimits: [{ namespace: "n", identifier: "ip", limit: 3, duration: 1_000, cost: 5 }] })), [
    /^routes\[0\]\.namespaceLimits\[0\]\.cost: \(5\) is larger than limit \(3\): no request could ever pass/,
  ]);
});

t.test("routes made through the API get the same checks, as a 400 naming the field", async (t) => {
  const h = await harness(t);
  const create = (body: Record<string, unknown>) => h.call("keygate.createRoute", { name: "r", match: { prefix: "/r" }, ...body });
  assertInvalidAt(
    t,
    await create({ upstream: { targets: [{ url: "http://127.0.0.1:1" }], retry: { attempts: 1 } } }),
    "body.upstream.retry",
    /pool of one target is never retried/,
  );
  assertInvalidAt(
    t,
    await create({
      upstream: { targets: [{ url: "http://127.0.0.1:1" }], health: { active: { path: "/h", intervalMs: 500, timeoutMs: 600 } } },
    }),
    "body.upstream.health.active.timeoutMs",
    /\(600\) must not be longer than health\.active\.intervalMs \(500\)/,
  );
  const limited = await create({
    upstream: "http://127.0.0.1:1",
    policies: [{ name: "limit", enabled: true, ratelimit: { limit: 2, windowMs: 1_000, cost: 3, identifiers: [{ remoteIp: {} }] } }],
  });
  assertInvalidAt(t, limited, "body.policies[0].ratelimit.cost", /\(3\) is larger than limit \(2\)/);
  const named = await create({
    upstream: "http://127.0.0.1:1",
    policies: [
      { name: "auth", enabled: true, keyauth: { keyspaces: ["api_x"], ratelimits: [{ name: "l", limit: 1, duration: 1_000, cost: 2 }] } },
    ],
  });
  assertInvalidAt(t, named, "body.policies[0].keyauth.ratelimits[0].cost", /\(2\) is larger than limit \(1\)/);
});
