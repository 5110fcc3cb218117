import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { post, run, SERVER_ENTRY, startServer } from "../helpers/process.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";

function configFile(yaml: string): string {
  const path = join(mkdtempSync(join(tmpdir(), "keygate-server-")), "keygate.yaml");
  writeFileSync(path, yaml);
  return path;
}

const ROOT_KEY_LINE = /ROOT KEY \(workspace ws_default, every permission\)[^\n]*\n\s+(root_[1-9A-HJ-NP-Za-km-z]+)/;

t.test("with no configuration keygate starts in memory and prints a working root key once", async (t) => {
  const server = await startServer(t, {});
  t.match(server.stdout(), /storage: in-memory/);
  t.match(server.stdout(), /analytics: embedded ClickHouse \(chDB\), data in \/.*keygate-analytics-/, "analytics on by default, in its directory");
  const rootKey = ROOT_KEY_LINE.exec(server.stdout())?.[1];
  t.ok(rootKey, "the banner holds a labelled root key");
  const port = new URL(server.baseUrl).port;
  t.match(server.stdout(), new RegExp(`Try it: +curl -s -X POST http://localhost:${port}/v2/apis\\.createApi`), "the example names the port the OS picked for port 0");
  const created = await post(server.baseUrl, "apis.createApi", rootKey as string, { name: "my-api" });
  t.equal(created.status, 200);
  const read = await post(server.baseUrl, "apis.getApi", rootKey as string, { apiId: created.body.data.apiId });
  t.same(read.body.data, { id: created.body.data.apiId, name: "my-api" });
  t.equal(await server.stop(), 0, "SIGTERM closes gracefully with exit code 0");
});

t.test("with Redis the data and the bootstrap root key survive a restart", async (t) => {
  const prefix = uniquePrefix(t, "server");
  const env = { KEYGATE_CONFIG: configFile(`storage:\n  redis: { url: "${REDIS_URL}", prefix: "${prefix}" }\n`) };
  const first = await startServer(t, env);
  t.match(first.stdout(), new RegExp(`storage: Redis at redis://127.0.0.1:6379/?, key prefix '${prefix}'`));
  const rootKey = ROOT_KEY_LINE.exec(first.stdout())?.[1] as string;
  t.ok(rootKey);
  const apiId = (await post(first.baseUrl, "apis.createApi", rootKey, { name: "durable" })).body.data.apiId;
  t.equal(await first.stop(), 0);

  const second = await startServer(t, env);
  t.notMatch(second.stdout(), /ROOT KEY/, "no new root key: the store already holds one");
  const read = await post(second.baseUrl, "apis.getApi", rootKey, { apiId });
  t.equal(read.status, 200, "the old root key and the API are still there");
  t.same(read.body.data, { id: apiId, name: "durable" });
  await second.stop();
});

t.test("a configured root key means none is generated, and declared APIs exist at once", async (t) => {
  const env = {
    KEYGATE_CONFIG: configFile(
      'rootKeys:\n  - { key: "root_dev_all", workspaceId: ws_acme, permissions: ["*"] }\napis:\n  - { id: api_orders, name: orders, workspaceId: ws_acme }\n',
    ),
  };
  const server = await startServer(t, env);
  t.notMatch(server.stdout(), /ROOT KEY/);
  const read = await post(server.baseUrl, "apis.getApi", "root_dev_all", { apiId: "api_orders" });
  t.same(read.body.data, { id: "api_orders", name: "orders" });
  await server.stop();
});

t.test("KEYGATE_ROOT_KEY is a root key of ws_default with every permission", async (t) => {
  const server = await startServer(t, { KEYGATE_ROOT_KEY: "root_from_the_environment" });
  t.notMatch(server.stdout(), /ROOT KEY/);
  t.equal((await post(server.baseUrl, "apis.createApi", "root_from_the_environment", { name: "env-made" })).status, 200);
  await server.stop();
});

t.test("an invalid configuration stops keygate with a message naming the bad path", async (t) => {
  const result = await run(SERVER_ENTRY, [], { KEYGATE_CONFIG: configFile("server:\n  port: high\n") });
  t.equal(result.code, 1);
  t.match(result.stderr, /invalid configuration .*keygate\.yaml/);
  t.match(result.stderr, /server\.port: must be an integer/);
});

t.test("an unreachable Redis stops keygate with a clear message", async (t) => {
  const result = await run(SERVER_ENTRY, [], { KEYGATE_CONFIG: configFile('storage:\n  redis: { url: "redis://127.0.0.1:1", connectTimeoutMs: 300 }\n'), PORT: "0" });
  t.equal(result.code, 1);
  t.match(result.stderr, /cannot use Redis at redis:\/\/127\.0\.0\.1:1: nothing is listening on 127\.0\.0\.1:1 \(connection refused\), still after 300 ms of retrying/);
});
