import t from "tap";
import { CLUSTER_ROOT_KEY, post, type RunningServer, startPair } from "../helpers/process.js";
import { REDIS_URL } from "../helpers/redis.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

// Identity credits across two keygate processes on one Redis: the shared balance is spent exactly, refunded
// exactly, and a balance given to an identity reaches the other process's cached key views. Analytics is off: it is
// not what is tested, and the processes start faster without it.

const NO_ANALYTICS = 'analytics:\n  engine: "off"\n';
// A loaded machine (other work sharing its two cores and this Redis) can keep Redis from answering a burst within
// the default deadline; keygate then refuses spends (503, credits_unavailable) rather than guess, which is right but
// not what these tests are about. A longer deadline keeps them about exactness.
const START = { startTimeoutMs: 60_000, redis: `url: "${REDIS_URL}", commandTimeoutMs: 10000` };

const call = async (instance: RunningServer, procedure: string, body: unknown) => {
  const answer = await post(instance.baseUrl, procedure, CLUSTER_ROOT_KEY, body);
  if (answer.status !== 200) process.stderr.write(`${procedure}: ${answer.status} ${JSON.stringify(answer.body)}\n`);
  return answer.body.data;
};

async function identityWithKeys(a: RunningServer, apiId: string, externalId: string, credits: Record<string, unknown>) {
  const identityId = (await call(a, "identities.createIdentity", { externalId, credits })).identityId as string;
  const keys: string[] = [];
  for (let i = 0; i < 3; i++) keys.push((await call(a, "keys.createKey", { apiId, externalId })).key as string);
  return { identityId, keys };
}

t.test("1,000 concurrent verifications over two keygates of three keys sharing 100 identity credits give exactly 100 VALID", async (t) => {
  const [a, b] = await startPair(t, NO_ANALYTICS, START);
  const apiId = (await call(a, "apis.createApi", { name: "shared-credits" })).apiId as string;
  const { identityId, keys } = await identityWithKeys(a, apiId, "customer", { remaining: 100 });
  // Both caches know every key first (cost 0 spends nothing).
  for (const instance of [a, b])
    for (const key of keys) t.equal((await call(instance, "keys.verifyKey", { key, credits: { cost: 0 } })).credits, 100);

  const round = () =>
    Promise.all(Array.from({ length: 1_000 }, (_, i) => call(i % 2 === 0 ? a : b, "keys.verifyKey", { key: keys[i % 3] })));
  const results = await round();
  const codes = new Map<string, number>();
  for (const result of results) codes.set(result.code, (codes.get(result.code) ?? 0) + 1);
  t.same(Object.fromEntries(codes), { VALID: 100, USAGE_EXCEEDED: 900 });
  const valid = results.filter((result) => result.code === "VALID");
  t.same(
    valid.map((result) => result.credits as number).sort((x, y) => x - y),
    Array.from({ length: 100 }, (_, i) => i),
    "each VALID saw a different balance, 99 down to 0: no credit was spent twice",
  );
  t.ok(
    results.every((result) => result.creditsSource === "identity"),
    "every answer says the identity's balance paid (or could not)",
  );
  t.equal((await call(b, "identities.getIdentity", { identity: identityId })).credits.remaining, 0);

  await call(b, "keygate.updateIdentityCredits", { identity: identityId, operation: "increment", value: 50 });
  const again = await round();
  const refused = again.filter((result) => result === undefined).length;
  t.equal(refused, 0, "every verification answered");
  t.equal(again.filter((result) => result?.code === "VALID").length, 50, "a top-up is spent exactly too");
});

t.test("over two keygates, the credits of requests the upstream failed all go back to the identity", async (t) => {
  const upstream = await startUpstream(t);
  const api = "api_identity_refund_pair";
  const [a, b] = await startPair(
    t,
    `${NO_ANALYTICS}apis:\n  - { id: ${api}, name: refunds, workspaceId: ws_cluster }\nroutes:\n  - { name: failing, match: { prefix: /status }, upstream: "${upstream.url}", apiId: ${api}, credits: { cost: 1 } }\n`,
    START,
  );
  const { identityId, keys } = await identityWithKeys(a, api, "refunded", { remaining: 50 });
  const requests = 600;
  const statuses = new Map<number, number>();
  let next = 0;
  const worker = async () => {
    while (next < requests) {
      const i = next++;
      const response = await fetch(`${(i % 2 === 0 ? a : b).baseUrl}/status/502`, { headers: { authorization: `Bearer ${keys[i % 3]}` } });
      await response.arrayBuffer();
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: 40 }, worker));
  t.equal((statuses.get(502) ?? 0) + (statuses.get(429) ?? 0), requests, "each request failed upstream or found no credit");
  t.ok((statuses.get(502) ?? 0) > 0, "requests reached the upstream");
  t.equal((await call(a, "identities.getIdentity", { identity: identityId })).credits.remaining, 50, "the balance is whole again");
});

t.test("identity credits given through one keygate reach the other's cached views of the identity's keys", async (t) => {
  const [a, b] = await startPair(t, NO_ANALYTICS, START);
  const apiId = (await call(a, "apis.createApi", { name: "late-credits" })).apiId as string;
  const identityId = (await call(a, "identities.createIdentity", { externalId: "later" })).identityId as string;
  const { key } = await call(a, "keys.createKey", { apiId, externalId: "later" });
  t.notOk("credits" in (await call(b, "keys.verifyKey", { key })), "unlimited, and cached on b");
  await call(a, "keygate.updateIdentityCredits", { identity: identityId, operation: "set", value: 5 });
  // Without the invalidation b would serve its view for its whole fresh window; the bound only ends a failing test.
  const answer = await waitFor("b spending the identity's credits", 10_000, async () => {
    const data = await call(b, "keys.verifyKey", { key, credits: { cost: 0 } });
    return "credits" in data ? data : undefined;
  });
  t.match(answer, { credits: 5, creditsSource: "identity" });
});
