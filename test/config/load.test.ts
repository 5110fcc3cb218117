import { availableParallelism } from "node:os";
import { join } from "node:path";
import t from "tap";
import { workerCount } from "../../src/cluster/primary.js";
import { loadConfig, validateConfig } from "../../src/config/load.js";
import { hashKey } from "../../src/lib/hash.js";
import { directoryWith, problemsOf } from "../helpers/config.js";

t.test("with no file and no environment every default applies", async (t) => {
  const config = loadConfig({ env: {}, cwd: directoryWith({}) });
  t.same(config.server, {
    host: "0.0.0.0",
    port: 8080,
    bodyLimit: 10485760,
    requestTimeoutMs: 30000,
    headersTimeoutMs: 60000,
    shutdownTimeoutMs: 10000,
    workers: 1,
  });
  t.same(config.gateway.apiRoutes, { allowedUpstreams: [] }, "routes made through the API reach nothing private");
  t.same(config.gateway.via, { maxHops: 10 }, "the Via pseudonym is derived");
  t.equal(config.storage.redis, undefined, "in-memory by default");
  t.equal(config.errors.docsUrl, "https://unkey.com/docs/errors");
  t.same(config.rootKeys, []);
  t.same(config.apis, []);
  t.ok(Object.isFrozen(config) && Object.isFrozen(config.server), "frozen");
});

t.test("config/keygate.yaml is read when present, KEYGATE_CONFIG wins over it", async (t) => {
  const cwd = directoryWith({ "config/keygate.yaml": "server: { port: 9001 }\n", "other.yaml": "server: { port: 9002 }\n" });
  t.equal(loadConfig({ env: {}, cwd }).server.port, 9001);
  t.equal(loadConfig({ env: { KEYGATE_CONFIG: "other.yaml" }, cwd }).server.port, 9002);
  t.same(
    problemsOf(() => loadConfig({ env: { KEYGATE_CONFIG: "missing.yaml" }, cwd })),
    [`KEYGATE_CONFIG: file not found: ${join(cwd, "missing.yaml")}`],
  );
});

t.test("environment variables override the file", async (t) => {
  const cwd = directoryWith({
    "config/keygate.yaml": "server: { port: 9001, host: 127.0.0.1 }\nstorage: { redis: { url: redis://a:6379, prefix: mine } }\n",
  });
  const vaultKey = Buffer.alloc(32, 7).toString("base64");
  const config = loadConfig({
    env: { PORT: "9100", HOST: "::", REDIS_URL: "redis://b:6380", KEYGATE_ROOT_KEY: "root_from_env", KEYGATE_VAULT_KEY: vaultKey },
    cwd,
  });
  t.equal(config.server.port, 9100);
  t.equal(config.server.host, "::");
  t.same(
    config.storage.redis,
    {
      url: "redis://b:6380",
      prefix: "mine",
      commandTimeoutMs: 500,
      connectTimeoutMs: 5000,
      breaker: { failureThreshold: 3, openMs: 1000 },
    },
    "REDIS_URL keeps the other redis settings",
  );
  t.same(config.rootKeys, [{ key: "root_from_env", name: "KEYGATE_ROOT_KEY", workspaceId: "ws_default", permissions: ["*"] }]);
  t.equal(config.vault.key, vaultKey);
});

t.test("cache.maxBytes: 64 MiB unless the file or KEYGATE_CACHE_MAX_BYTES says otherwise, at least 1 MiB", async (t) => {
  const bare = directoryWith({});
  t.equal(loadConfig({ env: {}, cwd: bare }).cache.maxBytes, 64 * 1024 * 1024);
  const withFile = directoryWith({ "config/keygate.yaml": "cache: { maxBytes: 33554432 }\n" });
  t.equal(loadConfig({ env: {}, cwd: withFile }).cache.maxBytes, 32 * 1024 * 1024);
  t.equal(
    loadConfig({ env: { KEYGATE_CACHE_MAX_BYTES: "268435456" }, cwd: withFile }).cache.maxBytes,
    256 * 1024 * 1024,
    "the variable wins",
  );
  t.match(
    problemsOf(() => loadConfig({ env: { KEYGATE_CACHE_MAX_BYTES: "64MB" }, cwd: bare })),
    [/KEYGATE_CACHE_MAX_BYTES: must be a whole number/],
  );
  t.match(
    problemsOf(() => loadConfig({ env: { KEYGATE_CACHE_MAX_BYTES: "1000" }, cwd: bare })),
    [/cache\.maxBytes \(from KEYGATE_CACHE_MAX_BYTES\): must be greater than or equal to 1048576/],
  );
});

t.test("KEYGATE_REDIS_PREFIX sets storage.redis.prefix, over the file's, with REDIS_URL or a file's Redis", async (t) => {
  const withFile = directoryWith({ "config/keygate.yaml": "storage: { redis: { url: redis://a:6379, prefix: mine } }\n" });
  t.same(loadConfig({ env: { KEYGATE_REDIS_PREFIX: "staging" }, cwd: withFile }).storage.redis, {
    url: "redis://a:6379",
    prefix: "staging",
    commandTimeoutMs: 500,
    connectTimeoutMs: 5000,
    breaker: { failureThreshold: 3, openMs: 1000 },
  });
  const bare = directoryWith({});
  t.equal(
    loadConfig({ env: { REDIS_URL: "redis://b:6380", KEYGATE_REDIS_PREFIX: "tenant:a" }, cwd: bare }).storage.redis?.prefix,
    "tenant:a",
  );
  t.equal(loadConfig({ env: { REDIS_URL: "redis://b:6380" }, cwd: bare }).storage.redis?.prefix, "keygate", "the default without it");
  t.same(
    problemsOf(() => loadConfig({ env: { KEYGATE_REDIS_PREFIX: "staging" }, cwd: bare })),
    ["KEYGATE_REDIS_PREFIX: needs a Redis store; set REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS (or storage.redis in the file) too"],
  );
  t.same(
    problemsOf(() => loadConfig({ env: { REDIS_URL: "redis://b:6380", KEYGATE_REDIS_PREFIX: "has space" }, cwd: bare })),
    ["storage.redis.prefix (from KEYGATE_REDIS_PREFIX): must contain only letters, digits and the characters _ . : -"],
  );
});

t.test("empty environment variables are ignored", async (t) => {
  const config = loadConfig({ env: { PORT: "", REDIS_URL: " " }, cwd: directoryWith({}) });
  t.equal(config.server.port, 8080);
  t.equal(config.storage.redis, undefined);
});

t.test("a bad value names its path, and the variable when it came from the environment", async (t) => {
  t.same(
    problemsOf(() => loadConfig({ env: { PORT: "eighty" }, cwd: directoryWith({}) })),
    ["PORT: must be a whole number, got 'eighty'"],
  );
  t.same(
    problemsOf(() => loadConfig({ env: { PORT: "70000" }, cwd: directoryWith({}) })),
    ["server.port (from PORT): must be less than or equal to 65535"],
  );
  t.same(
    problemsOf(() => loadConfig({ env: { REDIS_URL: "http://x" }, cwd: directoryWith({}) })),
    ["storage.redis.url (from REDIS_URL): must be a redis:// or rediss:// URL"],
  );
});

t.test("server.workers: a number or auto (KEYGATE_WORKERS); more than one needs Redis stores", async (t) => {
  const redis = { REDIS_URL: "redis://127.0.0.1:6379" };
  const cwd = directoryWith({});
  t.equal(loadConfig({ env: { ...redis, KEYGATE_WORKERS: "4" }, cwd }).server.workers, 4);
  const auto = loadConfig({ env: { ...redis, KEYGATE_WORKERS: "auto" }, cwd });
  t.equal(auto.server.workers, "auto");
  t.equal(workerCount(auto), availableParallelism(), "auto: one per available core");
  const autoInMemory = loadConfig({ env: { KEYGATE_WORKERS: "auto" }, cwd });
  t.equal(workerCount(autoInMemory), 1, "auto on in-memory stores: one process");
  t.same(
    problemsOf(() => loadConfig({ env: { KEYGATE_WORKERS: "2" }, cwd })),
    [
      "server.workers: more than one worker needs Redis stores (storage.redis or REDIS_URL): in-memory stores would be one per process, with limits, keys and credits apart",
    ],
  );
  for (const wrong of ["many", "0", "257"]) {
    t.same(
      problemsOf(() => loadConfig({ env: { ...redis, KEYGATE_WORKERS: wrong }, cwd })),
      [`server.workers: must be a whole number from 1 to 256, or auto (one per core); got '${wrong}'`],
    );
  }
});

t.test("METRICS_PORT and METRICS_TOKEN set metrics.port and metrics.token, checked like the file's", async (t) => {
  const config = loadConfig({ env: { METRICS_PORT: "9464", METRICS_TOKEN: "a-scrape-token-of-20" }, cwd: directoryWith({}) });
  t.equal(config.metrics.port, 9464);
  t.equal(config.metrics.token, "a-scrape-token-of-20");
  t.equal(config.metrics.enabled, true, "metrics are on by default");
  t.same(
    problemsOf(() => loadConfig({ env: { METRICS_PORT: "x" }, cwd: directoryWith({}) })),
    ["METRICS_PORT: must be a whole number, got 'x'"],
  );
  t.same(
    problemsOf(() => loadConfig({ env: { METRICS_TOKEN: "short" }, cwd: directoryWith({}) })),
    ["metrics.token (from METRICS_TOKEN): must be at least 16 characters long"],
  );
});

t.test("every problem of a file is reported at once, each with its path", async (t) => {
  const problems = problemsOf(() =>
    validateConfig({
      server: { port: -1, bodyLimit: "big" },
      storage: { redis: { prefix: "has space" } },
      rootKeys: [{ workspaceId: "ws bad", permissions: [] }],
      apis: [{ id: "api_1234567", name: "ok-name", workspaceId: "ws_a", colour: "red" }],
      unknownSection: {},
    }),
  );
  t.same(
    [...problems].sort(),
    [
      "storage.redis.prefix: must contain only letters, digits and the characters _ . : -",
      "apis[0].colour: is not a known field",
      "rootKeys[0].permissions: must contain at least 1 item",
      "rootKeys[0].workspaceId: must contain only letters, digits and _",
      "server.bodyLimit: must be an integer",
      "server.port: must be greater than or equal to 0",
      "unknownSection: is not a known field",
    ].sort(),
  );
});

t.test("root keys need exactly one of key or hash, and may not repeat", async (t) => {
  const hash = hashKey("root_dev_all");
  t.same(
    problemsOf(() => validateConfig({ rootKeys: [{ workspaceId: "ws_a", permissions: ["*"] }] })),
    ["rootKeys[0]: give exactly one of 'key' or 'hash'"],
  );
  t.same(
    problemsOf(() => validateConfig({ rootKeys: [{ key: "root_dev_all", hash, workspaceId: "ws_a", permissions: ["*"] }] })),
    ["rootKeys[0]: give exactly one of 'key' or 'hash'"],
  );
  t.same(
    problemsOf(() =>
      validateConfig({
        rootKeys: [
          { key: "root_dev_all", workspaceId: "ws_a", permissions: ["*"] },
          { hash, workspaceId: "ws_b", permissions: ["*"] },
        ],
      }),
    ),
    ["rootKeys[1]: the same root key as rootKeys[0]"],
  );
  t.same(
    problemsOf(() => validateConfig({ rootKeys: [{ hash: "not-base64-sha256", workspaceId: "ws_a", permissions: ["*"] }] })),
    ["rootKeys[0].hash: must be a SHA-256 hash in base64 (44 characters ending in =)"],
  );
});

t.test("declared API ids are unique and the vault key is 32 bytes", async (t) => {
  const api = { id: "api_orders", name: "orders", workspaceId: "ws_a" };
  t.same(
    problemsOf(() => validateConfig({ apis: [api, api] })),
    ["apis[1].id: 'api_orders' is declared twice (also apis[0])"],
  );
  t.same(
    problemsOf(() => validateConfig({ vault: { key: Buffer.alloc(16).toString("base64") } })),
    ["vault.key: must be 32 bytes encoded as base64 (e.g. `openssl rand -base64 32`)"],
  );
});

t.test("migrations: an id once per workspace, a known scheme", async (t) => {
  const legacy = { id: "legacy", workspaceId: "ws_a", scheme: "sha256-hex" };
  t.same(
    validateConfig({ migrations: [legacy, { ...legacy, workspaceId: "ws_b" }] }).migrations.length,
    2,
    "the same id in two workspaces",
  );
  t.same(
    problemsOf(() => validateConfig({ migrations: [legacy, { ...legacy, scheme: "prefixed-api-key" }] })),
    ["migrations[1].id: 'legacy' is declared twice for workspace ws_a (also migrations[0])"],
  );
  const [unknownScheme] = problemsOf(() => validateConfig({ migrations: [{ ...legacy, scheme: "md5" }] }));
  t.match(unknownScheme, /^migrations\[0\]\.scheme: must be one of: "sha256-hex", "sha256-base64", "prefixed-api-key"$/);
  t.match(problemsOf(() => validateConfig({ migrations: [{ id: "legacy", scheme: "sha256-hex" }] }))[0], /workspaceId/);
});

t.test("YAML syntax errors give the line", async (t) => {
  const cwd = directoryWith({ "config/keygate.yaml": "server:\n  port: [8080\n" });
  const problems = problemsOf(() => loadConfig({ env: {}, cwd }));
  t.match(problems[0], /^line \d+, column \d+: /);
  const scalar = directoryWith({ "config/keygate.yaml": "just a string\n" });
  t.same(
    problemsOf(() => loadConfig({ env: {}, cwd: scalar })),
    ["(top level): must be a mapping of sections (server, storage, ...)"],
  );
  const empty = directoryWith({ "config/keygate.yaml": "# nothing yet\n" });
  t.equal(loadConfig({ env: {}, cwd: empty }).server.port, 8080, "an empty file means defaults");
  const bareSections = directoryWith({ "config/keygate.yaml": "vault:\n  # key: later\nserver:\n" });
  t.same(loadConfig({ env: {}, cwd: bareSections }).vault, {}, "a section with only comments means defaults");
});

t.test("ratelimit.fail defaults to local and accepts only closed, open or local", async (t) => {
  t.equal(validateConfig({}).ratelimit.fail, "local");
  t.equal(validateConfig({ ratelimit: { fail: "closed" } }).ratelimit.fail, "closed");
  t.throws(() => validateConfig({ ratelimit: { fail: "sometimes" } }), /ratelimit\.fail: must be one of: "closed", "open", "local"/);
  t.throws(
    () => validateConfig({ storage: { redis: { url: "redis://a", breaker: { failureThreshold: 0 } } } }),
    /storage\.redis\.breaker\.failureThreshold: must be greater than or equal to 1/,
  );
});

t.test("analytics defaults to the embedded engine in ./data/analytics, with Unkey's retention", async (t) => {
  const config = loadConfig({ env: {}, cwd: directoryWith({}) });
  t.equal(config.analytics.engine, "embedded");
  t.equal(config.analytics.path, "./data/analytics");
  t.same(config.analytics.retentionDays, { raw: 90, perMinute: 90, perHour: 90, perDay: 365, perMonth: 1095, audit: 365 });
  t.same(config.analytics.quota, { windowMs: 3_600_000, queries: 1_000, executionMs: 1_800_000 });
  t.equal(config.analytics.clickhouse.database, "keygate");
});

t.test("KEYGATE_ANALYTICS_ENGINE and KEYGATE_ANALYTICS_PATH override the file", async (t) => {
  const cwd = directoryWith({ "config/keygate.yaml": "analytics: { engine: embedded, path: /var/lib/one }\n" });
  const config = loadConfig({ env: { KEYGATE_ANALYTICS_ENGINE: "off", KEYGATE_ANALYTICS_PATH: "/var/lib/two" }, cwd });
  t.equal(config.analytics.engine, "off");
  t.equal(config.analytics.path, "/var/lib/two");
  t.match(
    problemsOf(() => loadConfig({ env: { KEYGATE_ANALYTICS_ENGINE: "duckdb" }, cwd })).join("\n"),
    /analytics\.engine \(from KEYGATE_ANALYTICS_ENGINE\)/,
  );
});

t.test("a ClickHouse server is named by the environment, overriding the file and keeping its other settings", async (t) => {
  const cwd = directoryWith({
    "config/keygate.yaml": "analytics: { clickhouse: { url: http://one:8123, database: events, password: old } }\n",
  });
  const config = loadConfig({
    env: {
      KEYGATE_ANALYTICS_ENGINE: "clickhouse",
      KEYGATE_CLICKHOUSE_URL: "https://two:8443",
      KEYGATE_CLICKHOUSE_USERNAME: "keygate",
      KEYGATE_CLICKHOUSE_PASSWORD: "s3cret",
    },
    cwd,
  });
  t.equal(config.analytics.engine, "clickhouse");
  t.same(config.analytics.clickhouse, {
    url: "https://two:8443",
    database: "events",
    username: "keygate",
    password: "s3cret",
    requestTimeoutMs: 30000,
  });
  t.match(
    problemsOf(() => loadConfig({ env: { KEYGATE_ANALYTICS_ENGINE: "clickhouse", KEYGATE_CLICKHOUSE_URL: "tcp://x:9000" }, cwd })).join(
      "\n",
    ),
    /analytics\.clickhouse\.url \(from KEYGATE_CLICKHOUSE_URL\)/,
  );
});

t.test("the clickhouse engine needs a URL, and a batch may not exceed the buffer", async (t) => {
  t.same(
    problemsOf(() => validateConfig({ analytics: { engine: "clickhouse" } })),
    ["analytics.clickhouse.url: is required when analytics.engine is 'clickhouse'"],
  );
  t.same(
    problemsOf(() => validateConfig({ analytics: { buffer: { maxEvents: 10, batchSize: 11 } } })),
    ["analytics.buffer.batchSize: must not be larger than analytics.buffer.maxEvents"],
  );
  const problems = problemsOf(() =>
    validateConfig({ analytics: { clickhouse: { url: "tcp://x" }, retentionDays: { raw: 0 }, unknown: 1 } }),
  );
  t.ok(
    problems.some((p) => p.startsWith("analytics.clickhouse.url")),
    "a URL that is not http(s)",
  );
  t.ok(
    problems.some((p) => p.startsWith("analytics.retentionDays.raw")),
    "retention of at least a day",
  );
  t.ok(
    problems.some((p) => p.startsWith("analytics.unknown")),
    "no unknown fields",
  );
});
