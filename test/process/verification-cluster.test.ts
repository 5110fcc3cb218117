import t from "tap";
import { CLUSTER_ROOT_KEY, post, startPair } from "../helpers/process.js";
import { waitFor } from "../helpers/wait.js";

const verify = async (baseUrl: string, key: string) => (await post(baseUrl, "keys.verifyKey", CLUSTER_ROOT_KEY, { key })).body.data;

t.test("a key deleted through one keygate is refused by another that had it cached", async (t) => {
  const [a, b] = await startPair(t);
  const apiId = (await post(a.baseUrl, "apis.createApi", CLUSTER_ROOT_KEY, { name: "shared" })).body.data.apiId;
  const { key, keyId } = (await post(a.baseUrl, "keys.createKey", CLUSTER_ROOT_KEY, { apiId })).body.data;
  t.equal((await verify(b.baseUrl, key)).code, "VALID", "b has the key in its cache");
  t.equal((await verify(b.baseUrl, key)).code, "VALID");

  t.equal((await post(a.baseUrl, "keys.deleteKey", CLUSTER_ROOT_KEY, { keyId })).status, 200);
  // The cache would serve the key for its whole fresh window without the invalidation; the bound only ends a
  // failing test.
  const code = await waitFor("b refusing the deleted key", 10_000, async () => {
    const answer = (await verify(b.baseUrl, key)).code as string;
    return answer === "VALID" ? undefined : answer;
  });
  t.equal(code, "NOT_FOUND", "b refuses the key once a deleted it");
});

t.test("1,000 concurrent verifications of a key with 100 credits across two keygates give exactly 100 VALID", async (t) => {
  const [a, b] = await startPair(t);
  const apiId = (await post(a.baseUrl, "apis.createApi", CLUSTER_ROOT_KEY, { name: "metered" })).body.data.apiId;
  const { key, keyId } = (await post(a.baseUrl, "keys.createKey", CLUSTER_ROOT_KEY, { apiId, credits: { remaining: 100 } })).body.data;
  // Both caches know the key first (cost 0 spends nothing).
  for (const instance of [a, b])
    t.equal((await post(instance.baseUrl, "keys.verifyKey", CLUSTER_ROOT_KEY, { key, credits: { cost: 0 } })).body.data.credits, 100);

  const results = await Promise.all(Array.from({ length: 1_000 }, (_, i) => verify(i % 2 === 0 ? a.baseUrl : b.baseUrl, key)));
  const codes = new Map<string, number>();
  for (const result of results) codes.set(result.code, (codes.get(result.code) ?? 0) + 1);
  t.same(Object.fromEntries(codes), { VALID: 100, USAGE_EXCEEDED: 900 });
  t.same(
    results
      .filter((result) => result.code === "VALID")
      .map((result) => result.credits as number)
      .sort((x, y) => x - y),
    Array.from({ length: 100 }, (_, i) => i),
    "each VALID saw a different balance, 99 down to 0: no credit was spent twice",
  );
  t.equal((await post(b.baseUrl, "keys.getKey", CLUSTER_ROOT_KEY, { keyId })).body.data.credits.remaining, 0);
});
