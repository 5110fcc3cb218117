import t from "tap";
import { WriteNotReplicatedError } from "../../src/storage/redis/replica-wait.js";
import { openRedisStores, redisClient, uniquePrefix } from "../helpers/redis.js";

// The audit outbox in Redis: one stream under the prefix, in its own hash tag; with storage.redis.waitForReplicas an
// append waits for the replicas as a management write does, and says so when they do not confirm (the entries are
// in the stream all the same: the audit log appends them again, and the reads count them once).

t.test("the outbox is one stream under the prefix, tagged {audit}", async (t) => {
  const prefix = uniquePrefix(t, "audit-outbox");
  const stores = await openRedisStores(t, prefix);
  await stores.auditOutbox?.append(['{"id":"audit_1"}']);
  const inspect = await redisClient(t);
  t.same(await inspect.keys(`${prefix}:*`), [`${prefix}:{audit}:outbox`]);
  t.equal(await inspect.type(`${prefix}:{audit}:outbox`), "stream");
  t.match(stores.auditOutbox?.describe(), `${prefix}:{audit}:outbox`);
});

t.test("with replicaWait, an append no replica confirms is reported, and its entries are in the stream", async (t) => {
  const prefix = uniquePrefix(t, "audit-replicas");
  // The shared test Redis has no replica: WAIT answers 0 once its timeout passes.
  const stores = await openRedisStores(t, prefix, { replicaWait: { replicas: 1, timeoutMs: 50 } });
  await t.rejects(stores.auditOutbox?.append(['{"id":"audit_1"}']) as Promise<void>, WriteNotReplicatedError);
  t.same(
    (await stores.auditOutbox?.peek(10))?.map((item) => item.record),
    ['{"id":"audit_1"}'],
  );
  t.equal(stores.health.state, "closed", "Redis answered: the breaker stays closed");
});
