import t from "tap";
import { loadConfig, validateConfig } from "../../src/config/load.js";
import { directoryWith, problemsOf } from "../helpers/config.js";

// storage.redis names one of three deployments: a server (url), a Cluster (cluster.nodes) or a Sentinel-watched
// master (sentinel), from the file or from the environment.

const directoryWithConfig = (yaml: string) => directoryWith({ "config/keygate.yaml": yaml });

const redisOf = (raw: unknown) => validateConfig({ storage: { redis: raw } }).storage.redis;

t.test("each of the three forms is accepted alone, with the shared settings defaulted", async (t) => {
  t.equal(redisOf({ url: "redis://127.0.0.1:6379" })?.url, "redis://127.0.0.1:6379");
  const cluster = redisOf({ cluster: { nodes: ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"] } });
  t.same(cluster?.cluster, { nodes: ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"] });
  t.equal(cluster?.prefix, "keygate");
  t.equal(cluster?.commandTimeoutMs, 500);
  const sentinel = redisOf({ sentinel: { name: "mymaster", sentinels: ["rediss://:pw@s1:26379"], masterPassword: "secret" } });
  t.same(sentinel?.sentinel, { name: "mymaster", sentinels: ["rediss://:pw@s1:26379"], masterPassword: "secret" });
});

t.test("no form, or more than one, is refused with a message naming storage.redis", async (t) => {
  t.same(
    problemsOf(() => redisOf({ prefix: "p" })),
    ["storage.redis: give exactly one of 'url', 'cluster' or 'sentinel'"],
  );
  t.same(
    problemsOf(() => redisOf({ url: "redis://a", cluster: { nodes: ["redis://b"] } })),
    ["storage.redis: give exactly one of 'url', 'cluster' or 'sentinel' (found 'url' and 'cluster')"],
  );
  t.same(
    problemsOf(() => redisOf({ url: "redis://a", cluster: { nodes: ["redis://b"] }, sentinel: { name: "m", sentinels: ["redis://c"] } })),
    ["storage.redis: give exactly one of 'url', 'cluster' or 'sentinel' (found 'url' and 'cluster' and 'sentinel')"],
  );
});

t.test("cluster and sentinel URLs: same credentials and scheme throughout, no database, at least one", async (t) => {
  t.same(
    problemsOf(() => redisOf({ cluster: { nodes: ["redis://:a@n1:7000", "redis://:b@n2:7001"] } })),
    ["storage.redis.cluster.nodes[1]: must use the same scheme, user name and password as storage.redis.cluster.nodes[0]"],
  );
  t.same(
    problemsOf(() => redisOf({ cluster: { nodes: ["redis://n1:7000", "rediss://n2:7001"] } })),
    ["storage.redis.cluster.nodes[1]: must use the same scheme, user name and password as storage.redis.cluster.nodes[0]"],
  );
  t.same(
    problemsOf(() => redisOf({ sentinel: { name: "m", sentinels: ["redis://s1:26379/2"] } })),
    ["storage.redis.sentinel.sentinels[0]: names a database ('2'); a Redis Cluster or Sentinel setup serves database 0 only"],
  );
  t.same(
    problemsOf(() => redisOf({ cluster: { nodes: [] } })),
    ["storage.redis.cluster.nodes: must contain at least 1 item"],
  );
  t.same(
    problemsOf(() => redisOf({ sentinel: { sentinels: ["redis://s1"] } })),
    ["storage.redis.sentinel.name: is required"],
  );
  t.same(
    problemsOf(() => redisOf({ cluster: { nodes: ["http://n1"] } })),
    ["storage.redis.cluster.nodes[0]: must be a redis:// or rediss:// URL"],
  );
});

t.test("REDIS_CLUSTER_NODES and REDIS_SENTINELS set the form from the environment, replacing the file's", async (t) => {
  const cwd = directoryWithConfig("storage:\n  redis:\n    url: redis://file:6379\n    prefix: mine\n");
  const cluster = loadConfig({ cwd, env: { REDIS_CLUSTER_NODES: " redis://a:7000, redis://b:7001 ,," } }).storage.redis;
  t.same(cluster?.cluster, { nodes: ["redis://a:7000", "redis://b:7001"] });
  t.equal(cluster?.url, undefined, "the file's url gives way");
  t.equal(cluster?.prefix, "mine", "the file's other settings stay");

  const sentinel = loadConfig({ cwd, env: { REDIS_SENTINELS: "redis://s1:26379,redis://s2:26379", REDIS_SENTINEL_NAME: "mymaster" } })
    .storage.redis;
  t.same(sentinel?.sentinel, { name: "mymaster", sentinels: ["redis://s1:26379", "redis://s2:26379"] });
  t.equal(sentinel?.url, undefined);

  const named = directoryWithConfig("storage:\n  redis:\n    sentinel: { name: filemaster, sentinels: ['redis://old:26379'] }\n");
  t.same(
    loadConfig({ cwd: named, env: { REDIS_SENTINELS: "redis://new:26379" } }).storage.redis?.sentinel,
    { name: "filemaster", sentinels: ["redis://new:26379"] },
    "the file's name serves a sentinel list from the environment",
  );
});

t.test("the environment may name only one form, and a sentinel list needs a name", async (t) => {
  const cwd = directoryWithConfig("");
  t.same(
    problemsOf(() => loadConfig({ cwd, env: { REDIS_URL: "redis://a", REDIS_CLUSTER_NODES: "redis://b" } })),
    ["REDIS_URL and REDIS_CLUSTER_NODES: set only one Redis form"],
  );
  t.same(
    problemsOf(() => loadConfig({ cwd, env: { REDIS_SENTINELS: "redis://s1:26379" } })),
    ["REDIS_SENTINELS: needs REDIS_SENTINEL_NAME (or storage.redis.sentinel.name in the file) too"],
  );
  t.same(
    problemsOf(() => loadConfig({ cwd, env: { REDIS_SENTINEL_NAME: "m" } })),
    ["REDIS_SENTINEL_NAME: needs REDIS_SENTINELS (the sentinels' URLs, comma-separated) too"],
  );
  t.same(
    problemsOf(() => loadConfig({ cwd, env: { REDIS_CLUSTER_NODES: "redis://a/3" } })),
    ["storage.redis.cluster.nodes[0]: names a database ('3'); a Redis Cluster or Sentinel setup serves database 0 only"],
  );
});
