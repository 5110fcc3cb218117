import type { AddressInfo } from "node:net";
import t from "tap";
import { createKey, getKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";

const API = "api_gateway_refunds";

t.test("on Redis, every credit of a request the upstream failed comes back, however many refunds and spends meet", async (t) => {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    storage: "redis",
    config: {
      apis: [{ id: API, name: "refunds", workspaceId: "ws_test" }],
      routes: [{ name: "failing", match: { prefix: "/status" }, upstream: upstream.url, apiId: API, credits: { cost: 1 } }],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const { key, keyId } = await createKey(h, API, { credits: { remaining: 100 } });

  const requests = 2_000;
  const concurrency = 100;
  const statuses = new Map<number, number>();
  let next = 0;
  const worker = async () => {
    while (next < requests) {
      next++;
      const response = await fetch(`${base}/status/500`, { headers: { authorization: `Bearer ${key}` } });
      await response.arrayBuffer();
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));

  const failed = statuses.get(500) ?? 0;
  const exhausted = statuses.get(429) ?? 0;
  t.equal(
    failed + exhausted,
    requests,
    `each request either reached the failing upstream (${failed}) or found no credit left (${exhausted})`,
  );
  t.ok(failed > 0, "requests reached the upstream");
  t.equal((await getKey(h, keyId)).credits.remaining, 100, "the balance is whole again as soon as the last answer arrived");
});
