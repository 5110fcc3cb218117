import type { AddressInfo } from "node:net";
import t from "tap";
import type { CreditRefundEvent, VerificationEvent } from "../../src/domain/analytics/events.js";
import { recordingAnalytics } from "../helpers/analytics.js";
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

t.test("each refund is recorded for analytics under the verification it refunds; an answered request's is not", async (t) => {
  const upstream = await startUpstream(t);
  const verifications: VerificationEvent[] = [];
  const creditRefunds: CreditRefundEvent[] = [];
  const h = await harness(t, {
    analytics: recordingAnalytics({ verifications, creditRefunds }),
    config: {
      apis: [{ id: API, name: "refunds", workspaceId: "ws_test" }],
      routes: [{ name: "metered", match: { prefix: "/status" }, upstream: upstream.url, apiId: API, credits: { cost: 3 } }],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const identityId = (await h.call("identities.createIdentity", { externalId: "refunded", credits: { remaining: 30 } })).body.data
    .identityId as string;
  const own = await createKey(h, API, { credits: { remaining: 30 }, externalId: "refunded" });
  const shared = await createKey(h, API, { externalId: "refunded" });
  const statuses: number[] = [];
  for (const [key, path] of [
    [own.key, "/status/500"],
    [own.key, "/status/200"],
    [shared.key, "/status/503"],
    [shared.key, "/status/200"],
  ] as const) {
    const response = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}` } });
    await response.arrayBuffer();
    statuses.push(response.status);
  }
  t.same(statuses, [500, 200, 503, 200]);
  const verification = (index: number) => verifications[index] as VerificationEvent;
  t.same(
    creditRefunds.map(({ refundedAt, ...refund }) => refund),
    [0, 2].map((index) => ({
      requestId: verification(index).requestId,
      time: verification(index).time,
      workspaceId: "ws_test",
      keySpaceId: verification(index).keySpaceId,
      keyId: verification(index).keyId,
      identityId,
      externalId: "refunded",
      credits: 3,
      creditsSource: verification(index).creditsSource,
    })),
    "the two failed requests' refunds: their verification's request, time, key, identity and paying balance",
  );
  t.same(
    [verification(0).creditsSource, verification(2).creditsSource],
    ["key", "identity"],
    "one paid by the key's own balance, one by the identity's",
  );
  t.ok(
    creditRefunds.every((refund) => refund.refundedAt >= refund.time),
    "each refunded at or after its verification",
  );
});
