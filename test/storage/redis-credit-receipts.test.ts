import t, { type Test } from "tap";
import { connectRedis } from "../../src/storage/redis/connection.js";
import type { StoreLog } from "../../src/storage/redis/credit-reconciler.js";
import { defineCreditCommands } from "../../src/storage/redis/credit-scripts.js";
import { RECEIPT_TTL_MS } from "../../src/storage/redis/ratelimit-counter-store.js";
import { defineRatelimitCommand } from "../../src/storage/redis/ratelimit-script.js";
import { createRedisStores } from "../../src/storage/redis-stores.js";
import { isStoreUnavailable } from "../../src/storage/unavailable.js";
import { keyRecord } from "../helpers/records.js";
import { REDIS_URL, redisClient, uniquePrefix } from "../helpers/redis.js";
import { privateRedis } from "../helpers/redis-server.js";
import { waitFor } from "../helpers/wait.js";

const minute = { bucket: "b", limit: 1_000, durationMs: 60_000, cost: 1 };

/** Every line a store logs, as "level: message". */
function capturedLog(): StoreLog & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    info: (_details, message) => lines.push(`info: ${message}`),
    warn: (_details, message) => lines.push(`warn: ${message}`),
    error: (_details, message) => lines.push(`error: ${message}`),
  };
}

async function openStores(t: Test, url: string, prefix: string, options: Parameters<typeof createRedisStores>[3] = {}) {
  const redis = await connectRedis({ url, commandTimeoutMs: 200, connectTimeoutMs: 2_000 });
  const stores = createRedisStores(redis, prefix, true, { breaker: { failureThreshold: 1_000, openMs: 200 }, ...options });
  t.teardown(() => stores.close());
  return stores;
}

t.test("an execution that takes credits leaves a receipt of what it took, kept for a while; others leave none", async (t) => {
  const prefix = uniquePrefix(t, "receipts");
  const stores = await openStores(t, REDIS_URL, prefix);
  const inspect = await redisClient(t);
  await stores.keys.create(keyRecord("key_1"), { remaining: 10, lastRefillAt: 0 });
  await stores.keys.create(keyRecord("key_free"), null);
  const receipts = () => inspect.keys(`${prefix}:{ws_a}:credit-receipt:*`);

  await stores.ratelimitCounters.applyChecks("ws_a", [minute], undefined, { keyId: "key_1", cost: 0 });
  await stores.ratelimitCounters.applyChecks("ws_a", [minute], undefined, { keyId: "key_free", cost: 3 });
  await stores.ratelimitCounters.applyChecks("ws_a", [minute], undefined, { keyId: "key_1", cost: 11 });
  await stores.ratelimitCounters.applyChecks("ws_a", [minute]);
  t.same(await receipts(), [], "cost 0, an unlimited key, a denial and a call without credits took nothing, so no receipt");

  await stores.ratelimitCounters.applyChecks("ws_a", [minute], undefined, { keyId: "key_1", cost: 3 });
  const [receipt] = await receipts();
  t.equal(await inspect.get(receipt as string), "2:3", "3 credits from the balance at position 2 of KEYS (after the counter)");
  const ttl = await inspect.pttl(receipt as string);
  t.ok(ttl > RECEIPT_TTL_MS - 60_000 && ttl <= RECEIPT_TTL_MS, `kept ${RECEIPT_TTL_MS} ms (pttl ${ttl})`);
});

t.test("the scripts: a missed execution is given back if it ran and cancelled if not, in either order, once", async (t) => {
  const prefix = uniquePrefix(t, "reconcile");
  const redis = await redisClient(t);
  defineRatelimitCommand(redis);
  defineCreditCommands(redis);
  const balanceKey = `${prefix}:{ws_a}:key-credits:key_1`;
  const ttl = String(RECEIPT_TTL_MS);
  await redis.set(balanceKey, JSON.stringify({ remaining: 10, lastRefillAt: 0 }));
  // One call, no limit, a credit check of cost 3 on the balance at position 1, with a receipt key.
  const spend = (receiptKey: string) => redis.keygateRatelimit(2, balanceKey, receiptKey, "", "1", "0,0,1,1,3", ttl);
  const reconcile = (receiptKey: string) => redis.keygateReconcileCredits(2, receiptKey, balanceKey, "1", ttl, "");
  const remaining = async () => (JSON.parse((await redis.get(balanceKey)) as string) as { remaining: number }).remaining;

  const ran = `${prefix}:{ws_a}:credit-receipt:ran`;
  t.match(await spend(ran), /^\d+,1,7$/, "it ran: passed, 7 left");
  t.equal(await spend(ran), "cancelled", "sent again (a resend after a reconnect), it finds its receipt and runs nothing");
  t.equal(await remaining(), 7, "it took 3, once");
  t.equal(await reconcile(ran), "x3", "reconciled: the 3 credits its receipt names are given back");
  t.equal(await remaining(), 10, "the balance is whole again");
  t.equal(await reconcile(ran), "x3", "reconciling again changes nothing, and answers the same");
  t.equal(await spend(ran), "cancelled", "nor does running it once more");
  t.equal(await remaining(), 10, "still whole");

  const late = `${prefix}:{ws_a}:credit-receipt:late`;
  t.equal(await reconcile(late), "x", "reconciled before it ran: cancelled");
  t.equal(await redis.get(late), "x", "its receipt key is marked");
  t.ok((await redis.pttl(late)) > 0, "the cancellation expires too");
  t.equal(await spend(late), "cancelled", "when it runs at last it takes nothing");
  t.equal(await remaining(), 10, "the balance is untouched");

  const gone = `${prefix}:{ws_a}:credit-receipt:gone`;
  await spend(gone);
  await redis.del(balanceKey);
  t.equal(await reconcile(gone), "x0", "a balance removed meanwhile is left alone");
  t.equal(await redis.exists(balanceKey), 0, "and not created again");
});

t.test("a call whose answer never came is reconciled once Redis answers again, through failed attempts", async (t) => {
  const server = await privateRedis(t);
  const log = capturedLog();
  const stores = await openStores(t, server.url, "kg", { log, reconcileRetryMs: 50 });
  await stores.keys.create(keyRecord("key_1"), { remaining: 10, lastRefillAt: 0 });
  t.equal(
    (await stores.ratelimitCounters.applyChecks("ws_a", [minute], undefined, { keyId: "key_1", cost: 1 })).credit?.remaining,
    9,
    "a call answered in time spends",
  );

  server.hang();
  t.teardown(() => server.resume());
  const missed = await stores.ratelimitCounters.applyChecks("ws_a", [minute], undefined, { keyId: "key_1", cost: 2 }).then(
    () => undefined,
    (error: unknown) => error,
  );
  t.ok(isStoreUnavailable(missed), "the call fails as the store being unavailable");
  t.equal(stores.ratelimitBatches.pendingReconciliations, 1, "and waits to be reconciled");
  await waitFor("three reconciliation attempts fail while Redis is frozen", 10_000, () =>
    stores.ratelimitBatches.reconciliation.attempts >= 3 ? true : undefined,
  );
  t.equal(stores.ratelimitBatches.pendingReconciliations, 1, "failed attempts keep it waiting");

  server.resume();
  await waitFor("the reconciliation is done", 10_000, () => (stores.ratelimitBatches.pendingReconciliations === 0 ? true : undefined));
  t.equal((await stores.keys.getCredits("ws_a", "key_1"))?.remaining, 9, "the 2 credits the late execution took are back");
  t.same(stores.ratelimitBatches.reconciliation.creditsGivenBack, 2, "counted as given back");
  t.match(
    log.lines,
    [
      "warn: a call that may spend credits got no answer from Redis in time: it is reconciled once Redis answers",
      /^warn: gave back the credits/,
      /^info: every missed call/,
    ],
    "the log says it was missed, given back, and that none is left",
  );
});

t.test("close() settles what still waits; what it cannot settle is logged as an error", async (t) => {
  const server = await privateRedis(t);
  const log = capturedLog();
  // Attempts wait a minute: only close() tries in time.
  const stores = await openStores(t, server.url, "kg", { log, reconcileRetryMs: 60_000 });
  await stores.keys.create(keyRecord("key_1"), { remaining: 10, lastRefillAt: 0 });
  server.hang();
  await stores.ratelimitCounters.applyChecks("ws_a", [minute], undefined, { keyId: "key_1", cost: 4 }).catch(() => {});
  server.resume();
  await stores.ratelimitBatches.close();
  t.equal(stores.ratelimitBatches.pendingReconciliations, 0, "settled at close");
  t.equal((await stores.keys.getCredits("ws_a", "key_1"))?.remaining, 10, "the 4 credits the late execution took are back");

  const frozen = capturedLog();
  const other = await openStores(t, server.url, "kg", { log: frozen, reconcileRetryMs: 60_000 });
  server.hang();
  t.teardown(() => server.resume());
  await other.ratelimitCounters.applyChecks("ws_a", [minute], undefined, { keyId: "key_1", cost: 4 }).catch(() => {});
  await other.ratelimitBatches.close();
  t.equal(other.ratelimitBatches.reconciliation.givenUp, 1, "with Redis still frozen, close() gives it up");
  t.match(frozen.lines.at(-1), /^error: 1 missed script executions could not be reconciled before the store closed/, "logged as an error");
});

t.test("at most maxPendingReconciliations wait; beyond, the oldest is given up and logged", async (t) => {
  const server = await privateRedis(t);
  const log = capturedLog();
  const stores = await openStores(t, server.url, "kg", { log, reconcileRetryMs: 60_000, maxPendingReconciliations: 2 });
  await stores.keys.create(keyRecord("key_1"), { remaining: 10, lastRefillAt: 0 });
  server.hang();
  t.teardown(() => server.resume());
  for (let i = 0; i < 3; i++)
    await stores.ratelimitCounters.applyChecks("ws_a", [minute], undefined, { keyId: "key_1", cost: 1 }).catch(() => {});
  t.equal(stores.ratelimitBatches.pendingReconciliations, 2, "two wait");
  t.equal(stores.ratelimitBatches.reconciliation.givenUp, 1, "the oldest was given up");
  t.ok(
    log.lines.some((line) => line.startsWith("error: too many missed script executions")),
    "the one given up is logged",
  );
  server.resume();
  await stores.ratelimitBatches.close();
  t.equal((await stores.keys.getCredits("ws_a", "key_1"))?.remaining, 9, "the two kept are given back; the one given up stays spent");
});

t.test(
  "an execution that finds its receipt key set (sent again after its first answer was lost) fails the calls, and is reconciled",
  async (t) => {
    const prefix = uniquePrefix(t, "resent");
    const log = capturedLog();
    const stores = await openStores(t, REDIS_URL, prefix, { log, reconcileRetryMs: 20 });
    const inspect = await redisClient(t);
    await stores.keys.create(keyRecord("key_1"), { remaining: 10, lastRefillAt: 0 });
    // A fresh store numbers its executions from 0: the next one's receipt key is known.
    const instance = (stores.ratelimitBatches as unknown as { instanceId: string }).instanceId;
    const receipt = (n: number) => `${prefix}:{ws_a}:credit-receipt:${instance}.${n}`;

    // As if Redis had run it before and taken 3: its receipt is there, the balance shows the 3 taken.
    await inspect.set(receipt(0), "1:3", "PX", 60_000);
    await inspect.set(`${prefix}:{ws_a}:key-credits:key_1`, JSON.stringify({ remaining: 7, lastRefillAt: 0 }));
    const error = await stores.ratelimitCounters.applyChecks("ws_a", [], undefined, { keyId: "key_1", cost: 3 }).then(
      () => undefined,
      (failure: unknown) => failure,
    );
    t.ok(isStoreUnavailable(error), "its calls fail as the store being unavailable: their answer is gone");
    await waitFor("the reconciliation is done", 10_000, () => (stores.ratelimitBatches.pendingReconciliations === 0 ? true : undefined));
    t.equal((await stores.keys.getCredits("ws_a", "key_1"))?.remaining, 10, "what the first run took is given back");
    t.equal(await inspect.get(receipt(0)), "x3");
  },
);

t.test("an identity's balance a missed execution spent is given back to it, its threshold kept", async (t) => {
  const prefix = uniquePrefix(t, "identity-receipts");
  const stores = await openStores(t, REDIS_URL, prefix);
  const inspect = await redisClient(t);
  defineCreditCommands(inspect);
  await stores.identities.create(
    { id: "id_1", workspaceId: "ws_a", externalId: "team", ratelimits: [], createdAt: 0 },
    { remaining: 10, lastRefillAt: 0, lowThreshold: 2 },
  );
  await stores.ratelimitCounters.applyChecks("ws_a", [minute], undefined, { keyId: "key_1", identityId: "id_1", cost: 4 });
  const [receipt] = await inspect.keys(`${prefix}:{ws_a}:credit-receipt:*`);
  t.equal(await inspect.get(receipt as string), "2:4", "the receipt names the identity's balance, at position 2");
  const balanceKey = `${prefix}:{ws_a}:identity-credits:id_1`;
  t.equal(await inspect.keygateReconcileCredits(2, receipt as string, balanceKey, "2", String(RECEIPT_TTL_MS), ""), "x4");
  t.same(await stores.identities.getCredits("ws_a", "id_1"), { remaining: 10, lastRefillAt: 0, lowThreshold: 2 });
});
