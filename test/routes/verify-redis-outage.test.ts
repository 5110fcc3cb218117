import type { AddressInfo } from "node:net";
import t from "tap";
import { assertError } from "../helpers/assertions.js";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { privateRedis } from "../helpers/redis-server.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

const DEADLINE_MS = 200;
const API = "api_outage_verify";

t.test("while Redis hangs: cached keys still verify and pass the gateway; the rest fails fast as service_unavailable", async (t) => {
  const server = await privateRedis(t);
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    storage: "redis",
    config: {
      storage: {
        redis: {
          url: server.url,
          prefix: "kgtest:verify-outage",
          commandTimeoutMs: DEADLINE_MS,
          connectTimeoutMs: 2_000,
          breaker: { failureThreshold: 3, openMs: 200 },
        },
      },
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

  const served = await h.call("keys.verifyKey", { key: cached.key });
  t.equal(served.body.data.code, "VALID", "a cached key needs no Redis");
  t.equal(
    (await fetch(`${base}/svc/y`, { headers: { authorization: `Bearer ${cached.key}` } })).status,
    200,
    "the gateway lets it through",
  );

  // Each of the first calls ends at its command deadline (a hung Redis never answers); then the breaker is open
  // and the rest are refused without asking Redis.
  for (let i = 0; i < 6; i++) {
    assertError(
      t,
      await h.call("keys.verifyKey", { key: uncached.key }),
      "err:unkey:application:service_unavailable",
      /did not answer in time/,
    );
  }
  t.not(h.app.stores.health.state, "closed", "the breaker is open (or probing in the background): requests no longer ask Redis");

  assertError(t, await h.call("apis.createApi", { name: "during-outage" }), "err:unkey:application:service_unavailable");
  const gateway = await fetch(`${base}/svc/z`, { headers: { authorization: `Bearer ${uncached.key}` } });
  t.equal(gateway.status, 500);
  t.match(((await gateway.json()) as { error: { type: string } }).error.type, /service_unavailable$/);
  t.equal(upstream.seen.filter((request) => request.url === "/svc/z").length, 0, "an unverifiable request never reaches the upstream");

  server.resume();
  const code = await waitFor("the uncached key verifies again", 10_000, async (because) => {
    const answer = await h.call("keys.verifyKey", { key: uncached.key });
    const code = answer.body?.data?.code;
    because(`${answer.status} ${code ?? answer.body?.error?.type}`);
    return code === "VALID" ? code : undefined;
  });
  t.equal(code, "VALID", "once Redis answers again, keys verify again without a restart");
});
