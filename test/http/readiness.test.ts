import t from "tap";
import { harness } from "../helpers/harness.js";
import { parseScrape } from "../helpers/metrics.js";
import { privateRedis } from "../helpers/redis-server.js";
import { waitFor } from "../helpers/wait.js";

// Readiness follows Redis: 503 with the reason while it is down, 200 again once it answers. Liveness stays 200.

t.test("memory stores and analytics off: ready, and liveness as before", async (t) => {
  const h = await harness(t);
  const ready = await h.app.inject({ method: "GET", url: "/v2/readiness" });
  t.equal(ready.statusCode, 200);
  t.same(ready.json().data, { ready: true, checks: { redis: "ok", analytics: "ok" }, reasons: [] });
  t.equal((await h.app.inject({ method: "GET", url: "/v2/liveness" })).statusCode, 200);
});

t.test("a Redis that stops: 503 with the reason, metrics show the breaker open; back to 200 when it returns", async (t) => {
  const redis = await privateRedis(t);
  const h = await harness(t, { config: { storage: { redis: { url: redis.url, prefix: "readiness" } } } });
  const readiness = async () => {
    const response = await h.app.inject({ method: "GET", url: "/v2/readiness" });
    return { status: response.statusCode, data: response.json().data };
  };
  const metric = async (name: string, labels?: Record<string, string>) =>
    parseScrape((await h.app.inject({ method: "GET", url: "/metrics" })).body).value(name, labels);

  t.equal((await readiness()).status, 200);
  await h.call("apis.createApi", { name: "before" });
  t.ok((await metric("keygate_redis_command_duration_seconds_count", { command: "ping" })) >= 1, "the readiness ping is timed");
  t.equal(await metric("keygate_redis_breaker_open"), 0);

  await redis.stop();
  const down = await waitFor("readiness answers 503", 30_000, async () => {
    const answer = await readiness();
    return answer.status === 503 ? answer : undefined;
  });
  t.equal(down.data.ready, false);
  t.equal(down.data.checks.analytics, "ok");
  t.match(down.data.reasons[0], /^redis: /, "the reason names Redis");
  t.equal((await h.app.inject({ method: "GET", url: "/v2/liveness" })).statusCode, 200, "the process is still alive");
  await waitFor("the breaker opens", 30_000, async () =>
    (await readiness()).data.checks.redis.includes("circuit breaker") ? true : undefined,
  );
  t.equal(await metric("keygate_redis_breaker_open"), 1, "the breaker gauge says so");

  await redis.start();
  const up = await waitFor("readiness answers 200 again", 30_000, async () => {
    const answer = await readiness();
    return answer.status === 200 ? answer : undefined;
  });
  t.same(up.data, { ready: true, checks: { redis: "ok", analytics: "ok" }, reasons: [] });
  t.equal(await metric("keygate_redis_breaker_open"), 0);
});
