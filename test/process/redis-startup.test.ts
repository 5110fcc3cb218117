import { spawn } from "node:child_process";
import { Redis } from "ioredis";
import t from "tap";
import { CLI_ENTRY, run, SERVER_ENTRY } from "../helpers/process.js";
import { privateRedis } from "../helpers/redis-server.js";

const PASSWORD = "s3cret-not-for-logs";

/**
 * Starts keygate with `env` and reports how it ended: its exit code and output, or "listening" (then it is killed)
 * when it started although it should not have.
 */
function startKeygate(env: Record<string, string>): Promise<{ outcome: number | null | "listening"; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SERVER_ENTRY], {
      env: { PATH: process.env.PATH ?? "", PORT: "0", HOST: "127.0.0.1", KEYGATE_ANALYTICS_ENGINE: "off", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let started = false;
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      if (!started && stdout.includes("keygate is listening")) {
        started = true;
        child.kill("SIGKILL");
      }
    });
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("exit", (code) => resolve({ outcome: started ? "listening" : code, stdout, stderr }));
  });
}

t.test("keygate refuses to start on a Redis it cannot use, says why in words on stderr, and never prints the password", async (t) => {
  const server = await privateRedis(t, { args: ["--requirepass", PASSWORD, "--databases", "4"] });
  const cases = [
    {
      name: "a database the server does not have",
      url: `redis://:${PASSWORD}@127.0.0.1:${server.port}/99`,
      cause: /: database 99 does not exist on the server \(db index out of range/,
    },
    { name: "a wrong password", url: `redis://:wrong-${PASSWORD}@127.0.0.1:${server.port}`, cause: /: wrong password \(or user name\)/ },
    { name: "no password", url: `redis://127.0.0.1:${server.port}`, cause: /: the server needs a password and the URL gives none/ },
  ];
  for (const { name, url, cause } of cases) {
    const result = await startKeygate({ REDIS_URL: url });
    t.equal(result.outcome, 1, `${name}: exit code 1`);
    t.match(result.stderr, /^keygate: cannot start: cannot use Redis at redis:\/\//);
    t.match(result.stderr, cause);
    t.notMatch(result.stdout + result.stderr, PASSWORD, "the password appears nowhere");
  }
});

t.test("the CLI stops the same way: exit code 1 and the cause, before touching any data", async (t) => {
  const server = await privateRedis(t, { args: ["--databases", "4"] });
  const result = await run(CLI_ENTRY, ["root-key", "create", "--workspace", "ws_a", "--permission", "*"], { REDIS_URL: `${server.url}/9` });
  t.equal(result.code, 1);
  t.match(result.stderr, /^keygate: cannot use Redis at redis:\/\/127\.0\.0\.1:\d+\/9: database 9 does not exist on the server/);
  t.equal(result.stdout, "", "no root key was printed (none was created)");
  const inspect = new Redis(server.url, { lazyConnect: true });
  t.teardown(() => inspect.disconnect());
  await inspect.connect();
  t.equal(await inspect.dbsize(), 0, "nothing was written to database 0 instead");
});
