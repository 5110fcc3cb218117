import { Cluster, Redis } from "ioredis";
import t, { type Test } from "tap";
import {
  CLUSTER_SLOTS,
  type ClusterMaster,
  hashTagForSlot,
  type RedisCluster,
  slotOf,
  startRedisCluster,
} from "../helpers/redis-cluster.js";
import { waitFor } from "../helpers/wait.js";

// The Redis Cluster test infrastructure (test/helpers/redis-cluster.ts), proven with a plain ioredis Cluster client:
// one cluster for the file, changed by each test in turn (a failover, a restart, a reshard).

const cluster: RedisCluster = await startRedisCluster(t);

/** An ioredis Cluster client on the test's cluster, closed when the test ends. */
function clusterClient(t: Test, options: ConstructorParameters<typeof Cluster>[1] = {}): Cluster {
  const client = new Cluster([...cluster.urls], { ...options, redisOptions: { commandTimeout: 2_000, ...options.redisOptions } });
  client.on("error", () => {});
  t.teardown(() => client.disconnect());
  return client;
}

/** A key of each of `count` slots spread over the whole range. */
function keysAcrossSlots(label: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `${label}:${hashTagForSlot(Math.floor((i * CLUSTER_SLOTS) / count))}`);
}

t.test("the cluster has 3 masters, each with one replica, and serves every slot", async (t) => {
  const topology = await cluster.topology();
  t.equal(topology.masters.length, 3);
  t.same(
    topology.masters.map((master) => master.replicas.length),
    [1, 1, 1],
  );
  const served = topology.masters.flatMap((master) => master.slots).reduce((sum, [first, last]) => sum + last - first + 1, 0);
  t.equal(served, CLUSTER_SLOTS);
  t.same(await cluster.healthProblems(), []);

  const direct = new Redis(cluster.urls[0] as string, { lazyConnect: true });
  t.teardown(() => direct.disconnect());
  for (const key of ["a", "b", "keygate:{ws_1}:key:k1", "{}x", "x{}y{z}", "ünï{cödé}", "ключ", hashTagForSlot(4_242)]) {
    t.equal(slotOf(key), await direct.cluster("KEYSLOT", key), `slotOf(${key}) is the slot Redis computes`);
  }
});

t.test("ioredis writes and reads keys in slots of every master", async (t) => {
  const client = clusterClient(t);
  const keys = keysAcrossSlots("many", 300);
  await Promise.all(keys.map((key, i) => client.set(key, String(i))));
  t.same(
    await Promise.all(keys.map((key) => client.get(key))),
    keys.map((_, i) => String(i)),
  );
  const perMaster = await Promise.all(client.nodes("master").map((node) => node.dbsize()));
  t.equal(perMaster.length, 3);
  t.ok(
    perMaster.every((count) => count > 0),
    `every master holds some of the keys (${perMaster.join(", ")})`,
  );
});

t.test("a master killed under a write loop: its replica takes over, writes succeed again, replicated writes survive", async (t) => {
  const client = clusterClient(t);
  const keys = keysAcrossSlots("failover", 30);
  const victim = await cluster.masterOf(slotOf(keys[0] as string));
  // A write the replica has acknowledged (WAIT, sent with the key so that it goes to the key's master) is not lost.
  const [[, set], [, acknowledged]] = (await client
    .pipeline()
    .set(keys[0] as string, "replicated")
    .wait(1, 5_000)
    .exec()) as [[null, string], [null, number]];
  t.equal(set, "OK");
  t.equal(acknowledged, 1, "one replica acknowledged the write");

  let running = true;
  let rounds = 0;
  let failedWrites = 0;
  /** Rounds in a row that wrote every key. */
  let cleanRounds = 0;
  const loop = (async () => {
    while (running) {
      const results = await Promise.allSettled(keys.slice(1).map((key) => client.set(key, String(rounds))));
      const failed = results.filter((result) => result.status === "rejected").length;
      failedWrites += failed;
      cleanRounds = failed > 0 ? 0 : cleanRounds + 1;
      rounds++;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();

  const { killed, promoted, ms } = await cluster.killMaster(victim);
  t.equal(killed.id, victim.id);
  t.ok(
    victim.replicas.some((replica) => replica.id === promoted.id),
    "the victim's replica was promoted",
  );
  t.comment(
    `failover took ${ms} ms (cluster-node-timeout ${cluster.nodeTimeoutMs} ms); ${failedWrites} writes failed in ${rounds} rounds so far`,
  );

  // The client needs a moment after the cluster is healthy again: it learns the new master from a refresh. Only
  // rounds after the failover count.
  cleanRounds = 0;
  try {
    await waitFor("three rounds in a row write every key after the failover", 30_000, (because) => {
      because(`${cleanRounds} clean rounds in a row; ${failedWrites} writes failed in ${rounds} rounds`);
      return cleanRounds >= 3 ? true : undefined;
    });
  } finally {
    running = false;
    await loop;
  }
  t.pass("three rounds in a row wrote every key without an error");
  t.equal(await client.get(keys[0] as string), "replicated", "the write acknowledged by the replica is on the new master");

  const { ms: rejoinMs } = await cluster.restart(killed);
  t.comment(`the killed master rejoined as a replica in ${rejoinMs} ms`);
  t.ok(
    (await cluster.topology()).replicas.some((replica) => replica.id === killed.id),
    "the old master is a replica now",
  );
});

// While a slot migrates, a key already moved answers ASK at the source and a multi-key command that finds its keys
// split answers TRYAGAIN; once the slot has moved, the source answers MOVED. ioredis retries all three itself.
t.test("a reshard moves slots under a read/write loop: ioredis follows the redirects, nothing fails or is counted twice", async (t) => {
  const client = clusterClient(t);
  const [from, to] = (await cluster.topology()).masters as [ClusterMaster, ClusterMaster];
  // The slots the reshard will take (the source's lowest), each filled with keys so that migrating it takes a while.
  const moving = [...Array(CLUSTER_SLOTS).keys()]
    .filter((slot) => from.slots.some(([first, last]) => slot >= first && slot <= last))
    .slice(0, 40);
  const tags = moving.map((slot) => `reshard:${hashTagForSlot(slot)}`);
  for (const tag of tags) {
    await client.mset(Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`${tag}:filler:${i}`, "x".repeat(64)])));
  }
  client.defineCommand("incrBoth", { numberOfKeys: 2, lua: "redis.call('INCR', KEYS[1]); return redis.call('INCR', KEYS[2])" });
  const incrBoth = (a: string, b: string) => (client as unknown as { incrBoth(a: string, b: string): Promise<number> }).incrBoth(a, b);

  const acknowledged = new Map<string, number>(tags.map((tag) => [tag, 0]));
  const failures: string[] = [];
  let running = true;
  let operations = 0;
  let operationsWhileMoving = 0;
  let reshardRunning = false;
  const worker = async (offset: number) => {
    for (let i = offset; running; i += 4) {
      const tag = tags[i % tags.length] as string;
      try {
        await incrBoth(`${tag}:a`, `${tag}:b`);
        acknowledged.set(tag, (acknowledged.get(tag) ?? 0) + 1);
        const [a, b] = await client.mget(`${tag}:a`, `${tag}:b`);
        if (a !== b) failures.push(`${tag}: a=${a} b=${b}`);
        if ((await client.get(`${tag}:filler:${i % 30}`)) !== "x".repeat(64)) failures.push(`${tag}: filler ${i % 30} missing`);
        operations++;
        if (reshardRunning) operationsWhileMoving++;
      } catch (error) {
        failures.push(`${tag}: ${(error as Error).message}`);
      }
    }
  };
  const workers = [0, 1, 2, 3].map(worker);

  reshardRunning = true;
  // One key per MIGRATE keeps each slot half-moved for longer, so that the loop meets ASK and TRYAGAIN too.
  const reshard = await cluster.reshard({ from, to, slots: moving.length, pipeline: 1 });
  t.same(reshard.slots, moving, "the reshard takes the source's lowest slots");
  const { ms } = await reshard.done;
  reshardRunning = false;
  // A few more rounds after the move, on the new owner.
  const after = operations;
  try {
    await waitFor("50 more operations succeed after the reshard", 10_000, (because) => {
      because(`${operations - after} so far; failures: ${failures.slice(-3).join("; ") || "none"}`);
      return operations >= after + 50 ? true : undefined;
    });
  } finally {
    running = false;
    await Promise.all(workers);
  }

  t.comment(`reshard of ${moving.length} slots took ${ms} ms; ${operationsWhileMoving} operations ran during it, ${operations} in all`);
  t.same(failures, [], "no operation failed");
  t.ok(operationsWhileMoving > 0, "operations ran while the slots moved");
  for (const tag of tags) {
    t.equal(Number(await client.get(`${tag}:a`)), acknowledged.get(tag), `${tag}: every acknowledged increment counted once`);
  }
  const owner = await cluster.masterOf(moving[0] as number);
  t.equal(owner.id, to.id, "the slots belong to the target now");
  const direct = new Redis(from.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  t.teardown(() => direct.disconnect());
  await t.rejects(direct.get(`${tags[0]}:a`), /MOVED/, "the source redirects a key of a moved slot");
});

t.test("a frozen node answers nothing until it is resumed", async (t) => {
  const replica = (await cluster.topology()).replicas[0];
  if (!replica) throw new Error("no replica");
  const direct = new Redis(replica.url, { lazyConnect: true, commandTimeout: 500, maxRetriesPerRequest: 0 });
  direct.on("error", () => {});
  t.teardown(() => direct.disconnect());
  t.equal(await direct.ping(), "PONG");
  cluster.freeze(replica);
  await t.rejects(direct.ping(), /timed out/i);
  cluster.resume(replica);
  t.equal(await waitFor("the resumed replica answers PING", 10_000, () => direct.ping()), "PONG");
  await cluster.waitUntilHealthy();
});
