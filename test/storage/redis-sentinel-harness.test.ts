import { Redis, type RedisOptions } from "ioredis";
import t, { type Test } from "tap";
import { type RedisSentinel, startRedisSentinel } from "../helpers/redis-sentinel.js";
import { waitFor } from "../helpers/wait.js";

// The Redis Sentinel test infrastructure (test/helpers/redis-sentinel.ts), proven with a plain ioredis client that
// finds the master through the sentinels: one setup for the file, changed by each test in turn.

const sentinel: RedisSentinel = await startRedisSentinel(t);

/** An ioredis client that asks the test's sentinels for `role` (the master by default), closed when the test ends. */
function sentinelClient(t: Test, options: Pick<RedisOptions, "role"> = {}): Redis {
  const client = new Redis({ sentinels: [...sentinel.sentinels], name: sentinel.name, commandTimeout: 2_000, ...options });
  client.on("error", () => {});
  t.teardown(() => client.disconnect());
  return client;
}

t.test("one master, one replica and three sentinels that agree on the master", async (t) => {
  t.equal(sentinel.sentinels.length, 3);
  t.equal(sentinel.servers.length, 2);
  t.equal((await sentinel.master()).port, sentinel.servers[0]?.port, "the first server is the master");
  t.same(await sentinel.healthProblems(), []);

  const client = sentinelClient(t);
  t.equal(await client.set("harness:greeting", "hello"), "OK");
  t.equal(await client.wait(1, 5_000), 1, "the replica acknowledged the write");
  const replica = sentinelClient(t, { role: "slave" });
  t.equal(await replica.get("harness:greeting"), "hello", "a client asking for a replica reads the replicated value");
  t.equal((await replica.info("replication")).match(/^role:(\w+)/m)?.[1], "slave", "and is connected to the replica");
});

t.test("a master killed under a write loop: the sentinels promote the replica and the client follows", async (t) => {
  const client = sentinelClient(t);
  t.equal(await client.set("harness:before", "replicated"), "OK");
  t.equal(await client.wait(1, 5_000), 1, "the replica acknowledged the write before the kill");

  let running = true;
  let writes = 0;
  let failedWrites = 0;
  /** Writes in a row that succeeded. */
  let succeededInARow = 0;
  const loop = (async () => {
    while (running) {
      try {
        await client.set("harness:counter", String(writes));
        succeededInARow++;
      } catch {
        failedWrites++;
        succeededInARow = 0;
      }
      writes++;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();

  const { killed, promoted, ms } = await sentinel.killMaster();
  t.equal(killed.port, sentinel.servers[0]?.port);
  t.equal(promoted.port, sentinel.servers[1]?.port);
  t.comment(
    `failover took ${ms} ms (down-after-milliseconds ${sentinel.settings.downAfterMs}, failover-timeout ${sentinel.settings.failoverTimeoutMs}); ${failedWrites} of ${writes} writes failed so far`,
  );

  // The client reconnects on its own: it asks the sentinels again, which now name the promoted replica. Only writes
  // after the failover count.
  succeededInARow = 0;
  try {
    await waitFor("five writes in a row succeed after the failover", 30_000, (because) => {
      because(`${succeededInARow} in a row; ${failedWrites} of ${writes} writes failed`);
      return succeededInARow >= 5 ? true : undefined;
    });
  } finally {
    running = false;
    await loop;
  }
  t.pass("five writes in a row succeeded after the failover");
  t.equal((await client.info("replication")).match(/^role:(\w+)/m)?.[1], "master");
  t.equal(await client.get("harness:before"), "replicated", "the write acknowledged by the replica survived");

  const { ms: rejoinMs } = await sentinel.restart(killed);
  t.comment(`the old master came back and was made a replica in ${rejoinMs} ms`);
  t.equal((await sentinel.master()).port, promoted.port, "the promoted server stays master");
  const old = new Redis(killed.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  t.teardown(() => old.disconnect());
  t.equal((await old.info("replication")).match(/^role:(\w+)/m)?.[1], "slave", "the old master is a replica now");
  t.equal(await old.get("harness:before"), "replicated", "and holds the data again");
});
