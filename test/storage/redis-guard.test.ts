import { Redis } from "ioredis";
import t from "tap";
import { CircuitOpenError } from "../../src/lib/circuit-breaker.js";
import { isRedisUnavailable } from "../../src/storage/redis/guard.js";
import { createRedisStores } from "../../src/storage/redis-stores.js";
import { StoreUnavailableError } from "../../src/storage/unavailable.js";
import { redisClient, uniquePrefix } from "../helpers/redis.js";
import { blackHole } from "../helpers/redis-server.js";
import { within } from "../helpers/wait.js";

t.test("an error reply to a wrong command is a bug, not unavailability; a missed deadline is unavailability", async (t) => {
  const redis = await redisClient(t);
  const reply = await redis.call("keygate-no-such-command").catch((error: unknown) => error);
  t.equal((reply as Error).name, "ReplyError");
  t.equal(isRedisUnavailable(reply), false);

  const hole = await blackHole(t);
  const hung = new Redis(hole.url, { lazyConnect: true, commandTimeout: 100, maxRetriesPerRequest: 1 });
  hung.on("error", () => {});
  t.teardown(() => hung.disconnect());
  hung.connect().catch(() => {});
  const timeout = await hung.ping().catch((error: unknown) => error);
  t.match((timeout as Error).message, /timed out/);
  t.equal(isRedisUnavailable(timeout), true);
});

t.test(
  "rate limit stores on a Redis that never answers: each call waits one deadline until the breaker opens, then fails at once",
  async (t) => {
    const hole = await blackHole(t);
    const redis = new Redis(hole.url, { lazyConnect: true, commandTimeout: 150, maxRetriesPerRequest: 1 });
    redis.on("error", () => {});
    redis.connect().catch(() => {});
    const stores = createRedisStores(redis, uniquePrefix(t, "hole"), true, { breaker: { failureThreshold: 2, openMs: 60_000 } });
    t.teardown(() => redis.disconnect());
    const check = { bucket: "b", limit: 5, durationMs: 1_000, cost: 1 };

    const attempt = () =>
      stores.ratelimitCounters.applyChecks("ws_a", [check]).then(
        () => undefined,
        (failure: unknown) => failure,
      );
    for (const n of [1, 2]) {
      // Without the deadline the call would never end: the bound only stops a failing test from hanging.
      const error = await within(10_000, `call ${n} ending`, attempt());
      t.ok(error instanceof StoreUnavailableError, `call ${n} fails as unavailable`);
      t.notOk((error as StoreUnavailableError).cause instanceof CircuitOpenError, `call ${n} reached the connection`);
      t.match(((error as StoreUnavailableError).cause as Error).message, /timed out/, `call ${n} ended at its deadline`);
    }
    t.equal(stores.breaker.state, "open");
    const error = await attempt();
    t.ok(error instanceof StoreUnavailableError);
    t.ok((error as StoreUnavailableError).cause instanceof CircuitOpenError, "the third call never reached the connection");
    await t.rejects(
      stores.ratelimitNamespaces.getNamespace("ws_a", "rlns_1"),
      StoreUnavailableError,
      "the namespace store shares the breaker",
    );
  },
);
