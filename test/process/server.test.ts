import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { post, type RunningServer, run, SERVER_ENTRY, startServer, workingDirectory } from "../helpers/process.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";
import { waitFor } from "../helpers/wait.js";

function configFile(yaml: string): string {
  const path = join(mkdtempSync(join(tmpdir(), "keygate-server-")), "keygate.yaml");
  writeFileSync(path, yaml);
  return path;
}

/** The bootstrap root key a server run without a terminal wrote under its working directory, if any. */
function bootstrapKeyFile(server: RunningServer): string | undefined {
  const path = join(server.cwd, "data", "bootstrap-root-key");
  return existsSync(path) ? path : undefined;
}

t.test(
  "with no configuration and no terminal, keygate starts in memory, logs JSON lines only, and writes a working root key to a file of its own",
  async (t) => {
    const server = await startServer(t, {});
    const lines = server.logLines();
    t.ok(lines.length > 0, `stdout is ${lines.length} JSON lines, nothing else`);
    const messages = lines.map((line) => line.msg as string);
    t.ok(
      messages.some((message) =>
        /^storage: in-memory \(keys, APIs and every other record are lost when keygate stops, while analytics and the audit log stay in \/.*keygate-analytics-.* and will name records that no longer exist; set REDIS_URL to keep the records in Redis\)$/.test(
          message,
        ),
      ),
      "in memory, and what outlives the process: analytics and the audit log, in their directory",
    );
    t.ok(
      messages.some((message) => /^analytics: embedded ClickHouse \(chDB\), data in \/.*keygate-analytics-/.test(message)),
      "analytics on by default, in its directory",
    );
    const listening = lines.find((line) => typeof line.msg === "string" && line.msg.startsWith("keygate is listening on"));
    t.equal(listening?.port, Number(new URL(server.baseUrl).port), "the start-up line names the port the OS picked for port 0");

    const path = bootstrapKeyFile(server);
    t.ok(path, "the key is in data/bootstrap-root-key under the working directory");
    t.equal(statSync(path as string).mode & 0o777, 0o600, "readable and writable by its owner only");
    const rootKey = readFileSync(path as string, "utf8").trim();
    t.match(rootKey, /^root_[1-9A-HJ-NP-Za-km-z]+$/);
    const notice = lines.find((line) => line.file === path);
    t.equal(notice?.level, 40, "a warning names the file");
    t.match(notice?.msg, /delete the file/, "and says to delete it once read");
    t.notOk(server.stdout().includes(rootKey) || server.stderr().includes(rootKey), "the key itself is neither on stdout nor on stderr");

    const created = await post(server.baseUrl, "apis.createApi", rootKey, { name: "my-api" });
    t.equal(created.status, 200, "and it works");
    const read = await post(server.baseUrl, "apis.getApi", rootKey, { apiId: created.body.data.apiId });
    t.same(read.body.data, { id: created.body.data.apiId, name: "my-api" });
    t.equal(await server.stop(), 0, "SIGTERM closes gracefully with exit code 0");
  },
);

/** util-linux `script`, which gives a command a terminal (a pseudo-TTY); .ci/run installs it where it is missing. */
const SCRIPT = ["/usr/bin/script", "/bin/script"].find((path) => existsSync(path));

t.test("on a terminal, the key is shown on stderr once; stdout stays JSON lines without it, and no file is written", async (t) => {
  if (!SCRIPT) throw new Error("this test needs util-linux `script` (Debian package bsdutils) to give keygate a terminal");
  const cwd = workingDirectory(t);
  const stdoutPath = join(cwd, "stdout.log");
  // stderr is the terminal `script` provides; stdout goes to a file, as a log collector would take it.
  const child = spawn(SCRIPT as string, ["-qfec", `exec "${process.execPath}" "${SERVER_ENTRY}" > "${stdoutPath}"`, "/dev/null"], {
    cwd,
    env: { PATH: process.env.PATH ?? "", PORT: "0", HOST: "127.0.0.1", KEYGATE_ANALYTICS_ENGINE: "off" },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let terminal = "";
  child.stdout.on("data", (chunk: Buffer) => (terminal += chunk.toString()));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  t.teardown(() => {
    if (child.exitCode === null) child.kill("SIGKILL");
  });
  const stdoutLines = () =>
    existsSync(stdoutPath)
      ? readFileSync(stdoutPath, "utf8")
          .split("\n")
          .filter((line) => line !== "")
      : [];
  await waitFor(
    "the terminal shows a root key",
    15_000,
    () => (/root_[1-9A-HJ-NP-Za-km-z]{20,}\s/.test(terminal) ? true : undefined),
    async () => `the terminal so far:\n${terminal}`,
  );

  const rootKey = /ROOT KEY \(workspace ws_default, every permission\)[^\n]*\n\s*\n\s+(root_[1-9A-HJ-NP-Za-km-z]+)/.exec(terminal)?.[1];
  t.ok(rootKey, "the terminal shows the key");
  t.equal(terminal.split(rootKey as string).length - 1, 1, "once");
  t.match(terminal, /Try it, with ROOT_KEY set to that key:/);
  const lines = stdoutLines().map((line) => JSON.parse(line) as Record<string, unknown>);
  const listening = lines.find((line) => typeof line.msg === "string" && line.msg.startsWith("keygate is listening on"));
  t.ok(listening, "stdout is JSON lines, the start-up summary among them");
  t.ok(
    lines.some((line) => line.shownOn === "stderr"),
    "one of them says where the key was shown",
  );
  t.notOk(readFileSync(stdoutPath, "utf8").includes(rootKey as string), "the key is not on stdout");
  t.notOk(existsSync(join(cwd, "data", "bootstrap-root-key")), "nor in a file");
  const created = await post(listening?.address as string, "apis.createApi", rootKey as string, { name: "from-the-terminal" });
  t.equal(created.status, 200, "and it works");

  process.kill(listening?.pid as number, "SIGTERM");
  await exited;
});

t.test("with Redis the data and the bootstrap root key survive a restart", async (t) => {
  const prefix = uniquePrefix(t, "server");
  const env = { KEYGATE_CONFIG: configFile(`storage:\n  redis: { url: "${REDIS_URL}", prefix: "${prefix}" }\nlogging:\n  level: warn\n`) };
  const cwd = workingDirectory(t);
  const first = await startServer(t, env, undefined, cwd);
  t.match(
    first.stdout(),
    new RegExp(`storage: Redis at redis://127.0.0.1:6379/?, key prefix '${prefix}'`),
    "the start-up lines are written at logging.level warn too",
  );
  const rootKey = readFileSync(bootstrapKeyFile(first) as string, "utf8").trim();
  t.ok(rootKey);
  const apiId = (await post(first.baseUrl, "apis.createApi", rootKey, { name: "durable" })).body.data.apiId;
  t.equal(await first.stop(), 0);
  rmSync(join(cwd, "data", "bootstrap-root-key"));

  const second = await startServer(t, env, undefined, cwd);
  t.notOk(bootstrapKeyFile(second), "no new root key: the store already holds one");
  t.notMatch(second.stdout(), /bootstrap root key/);
  const read = await post(second.baseUrl, "apis.getApi", rootKey, { apiId });
  t.equal(read.status, 200, "the old root key and the API are still there");
  t.same(read.body.data, { id: apiId, name: "durable" });
  await second.stop();
});

t.test("a bootstrap root key that cannot be written is revoked, and the next start makes one that can", async (t) => {
  const prefix = uniquePrefix(t, "server-unwritable");
  const env = { KEYGATE_CONFIG: configFile(`storage:\n  redis: { url: "${REDIS_URL}", prefix: "${prefix}" }\n`) };
  const cwd = workingDirectory(t);
  writeFileSync(join(cwd, "data"), "a file where the data directory should be");
  const first = await startServer(t, env, undefined, cwd);
  const failure = first.logLines().find((line) => line.level === 50);
  t.match(failure?.msg, /could not write the bootstrap root key .* so it was revoked/, "an error says so and what to do instead");
  t.equal(await first.stop(), 0);

  rmSync(join(cwd, "data"));
  const second = await startServer(t, env, undefined, cwd);
  const rootKey = readFileSync(bootstrapKeyFile(second) as string, "utf8").trim();
  t.equal((await post(second.baseUrl, "apis.createApi", rootKey, { name: "second-try" })).status, 200, "a new key, written this time");
  await second.stop();
});

t.test("a configured root key means none is generated, and declared APIs exist at once", async (t) => {
  const env = {
    KEYGATE_CONFIG: configFile(
      'rootKeys:\n  - { key: "root_dev_all", workspaceId: ws_acme, permissions: ["*"] }\napis:\n  - { id: api_orders, name: orders, workspaceId: ws_acme }\n',
    ),
  };
  const server = await startServer(t, env);
  t.notOk(bootstrapKeyFile(server), "no key file");
  t.notMatch(server.stdout(), /bootstrap root key/);
  const read = await post(server.baseUrl, "apis.getApi", "root_dev_all", { apiId: "api_orders" });
  t.same(read.body.data, { id: "api_orders", name: "orders" });
  await server.stop();
});

t.test("KEYGATE_ROOT_KEY is a root key of ws_default with every permission", async (t) => {
  const server = await startServer(t, { KEYGATE_ROOT_KEY: "root_from_the_environment" });
  t.notOk(bootstrapKeyFile(server));
  t.notMatch(server.stdout(), /bootstrap root key/);
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
  const result = await run(SERVER_ENTRY, [], {
    KEYGATE_CONFIG: configFile('storage:\n  redis: { url: "redis://127.0.0.1:1", connectTimeoutMs: 300 }\n'),
    PORT: "0",
  });
  t.equal(result.code, 1);
  t.match(
    result.stderr,
    /cannot use Redis at redis:\/\/127\.0\.0\.1:1: nothing is listening on 127\.0\.0\.1:1 \(connection refused\), still after 300 ms of retrying/,
  );
});
