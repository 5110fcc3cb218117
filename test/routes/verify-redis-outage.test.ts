import type { AddressInfo } from "node:net";
import t from "tap";
import { assertError } from "../helpers/assertions.js";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { privateRedis } from "../helpers/redis-server.js";
import { startUpstream } from "../helpers/upstream.js";

const DEADLINE_MS = 200;
const API = "api_outage_verify";

t.test("while Redis hangs: cached keys still verify and pass the gateway; the rest fails fast as service_unavailable", async (t) => {
  const server = await privateRedis(t);
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    storage: "redis",
    config: {
      storage: { redis: { url: server.url, prefix: "kgtest:verify-outage", commandTimeoutMs: DEADLINE_MS, connectTimeoutMs: 2_000, breaker: { failureThreshold: 3, openMs: 200 } } },
      apis: [{ id: API, name: "outage", workspaceId: "ws_test" }],
      routes: [{ name: "svc", match: { prefix: "/svc" }, upstream: upstream.url, apiId: API }],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const cached = await createKey(h, API);
  const uncached = await createKey(h, API);
  t.equal((await h.call("keys.verifyKey", { key: cached.key })).body.data.code, "VALID", "in the cache before the outage");
  t.equal((await fetch(`${base}/svc/x`, { headers: { authorization: `Bearer ${cached.key}` } })).status, 200);

  server.hang();
  t.teardown(() => server.resume());
  const timed = async <T>(work: () => Promise<T>) => {
    const started = performance.now();
    const result = await work();
    return { result, ms: performance.now() - started };
  };

  const served = await timed(() => h.call("keys.verifyKey", { key: cached.key }));
  t.equal(served.result.body.data.code, "VALID", "a cached key needs no Redis");
  t.ok(served.ms < DEADLINE_MS, `and answers without waiting (${Math.round(served.ms)} ms)`);
  t.equal((await fetch(`${base}/svc/y`, { headers: { authorization: `Bearer ${cached.key}` } })).status, 200, "the gateway lets it through");

  const failures = [];
  for (let i = 0; i < 6; i++) failures.push(await timed(() => h.call("keys.verifyKey", { key: uncached.key })));
  for (const { result } of failures) assertError(t, result, "err:unkey:application:service_unavailable", /did not answer in time/);
  const slowest = Math.max(...failures.map((failure) => failure.ms));
  t.ok(slowest < 1_500, `no request waited much past the ${DEADLINE_MS} ms deadline (slowest ${Math.round(slowest)} ms)`);
  const tail = failures.slice(3).reduce((sum, failure) => sum + failure.ms, 0);
  t.ok(tail < 2 * DEADLINE_MS, `once the breaker opened, the last 3 took ${Math.round(tail)} ms together`);

  const management = await timed(() => h.call("apis.createApi", { name: "during-outage" }));
  assertError(t, management.result, "err:unkey:application:service_unavailable");
  t.ok(management.ms < DEADLINE_MS, `management fails fast too (${Math.round(management.ms)} ms)`);
  const gateway = await fetch(`${base}/svc/z`, { headers: { authorization: `Bearer ${uncached.key}` } });
  t.equal(gateway.status, 500);
  t.match(((await gateway.json()) as { error: { type: string } }).error.type, /service_unavailable$/);
  t.equal(upstream.seen.filter((request) => request.url === "/svc/z").length, 0, "an unverifiable request never reaches the upstream");

  server.resume();
  const started = Date.now();
  let code = "";
  while (code !== "VALID" && Date.now() - started < 10_000) {
    code = (await h.call("keys.verifyKey", { key: uncached.key })).body?.data?.code ?? "";
    if (code !== "VALID") await new Promise((resolve) => setTimeout(resolve, 50));
  }
  t.equal(code, "VALID", "once Redis answers again, keys verify again without a restart");
});
