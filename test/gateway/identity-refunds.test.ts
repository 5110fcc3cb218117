import type { AddressInfo } from "node:net";
import t from "tap";
import { createKey } from "../helpers/fixtures.js";
import { harness, STORAGE_KINDS } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";

const API = "api_identity_refunds";

// A key that spends its identity's credits gets them back there when the upstream fails: the balance that paid.

for (const storage of STORAGE_KINDS) {
  t.test(`on ${storage} stores, the credits of failed requests go back to the identity that paid`, async (t) => {
    const upstream = await startUpstream(t);
    const h = await harness(t, {
      storage,
      config: {
        apis: [{ id: API, name: "identity-refunds", workspaceId: "ws_test" }],
        routes: [{ name: "metered", match: { prefix: "/status" }, upstream: upstream.url, apiId: API, credits: { cost: 1 } }],
      },
    });
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
    const identity = (await h.call("identities.createIdentity", { externalId: "customer", credits: { remaining: 20 } })).body.data
      .identityId as string;
    const keys = await Promise.all([1, 2, 3].map(() => createKey(h, API, { externalId: "customer" })));
    const balance = async () => (await h.call("identities.getIdentity", { identity })).body.data.credits.remaining;

    const requests = 300;
    const statuses = new Map<number, number>();
    let next = 0;
    const worker = async () => {
      while (next < requests) {
        const key = (keys[next++ % 3] as { key: string }).key;
        const response = await fetch(`${base}/status/500`, { headers: { authorization: `Bearer ${key}` } });
        await response.arrayBuffer();
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      }
    };
    await Promise.all(Array.from({ length: 30 }, worker));
    t.equal((statuses.get(500) ?? 0) + (statuses.get(429) ?? 0), requests, "each request failed upstream or found no credit");
    t.ok((statuses.get(500) ?? 0) > 0, "requests reached the upstream");
    t.equal(await balance(), 20, "the identity's balance is whole again");

    const ok = await fetch(`${base}/status/200`, { headers: { authorization: `Bearer ${(keys[0] as { key: string }).key}` } });
    await ok.arrayBuffer();
    t.equal(ok.status, 200);
    t.equal(await balance(), 19, "an answered request keeps its credit spent");
    t.notOk("credits" in (await h.call("keys.getKey", { keyId: (keys[0] as { keyId: string }).keyId })).body.data, "no key got a balance");
  });
}
