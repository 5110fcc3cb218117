import { Redis } from "ioredis";
import t, { type Test } from "tap";
import { connectRedis } from "../../src/storage/redis/connection.js";
import { freePort } from "../helpers/ports.js";
import { blackHole, privateRedis } from "../helpers/redis-server.js";

const PASSWORD = "s3cret-not-for-logs";

/** connectRedis's failure message (the test fails when it connects). */
async function refusal(url: string, connectTimeoutMs = 5_000): Promise<string> {
  try {
    const redis = await connectRedis({ url, commandTimeoutMs: 500, connectTimeoutMs });
    redis.disconnect();
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error(`connectRedis(${url}) connected`);
}

/** Connections the server accepted so far (INFO stats), read with a client of the test's own. */
async function connectionsReceived(t: Test, url: string): Promise<number> {
  const admin = new Redis(url, { lazyConnect: true });
  t.teardown(() => admin.disconnect());
  await admin.connect();
  const stats = await admin.info("stats");
  admin.disconnect();
  return Number(/total_connections_received:(\d+)/.exec(stats)?.[1]);
}

t.test("a database the server does not have is refused, not silently replaced by database 0; one it has is used", async (t) => {
  const server = await privateRedis(t, { args: ["--databases", "4"] });
  t.equal(
    await refusal(`${server.url}/4`),
    `cannot use Redis at ${server.url}/4: database 4 does not exist on the server (db index out of range: it has fewer databases, see its 'databases' setting)`,
  );
  t.match(await refusal(`${server.url}/four`), /^cannot use Redis at .*: the URL's database 'four' is not a database index/);

  const redis = await connectRedis({ url: `${server.url}/3`, commandTimeoutMs: 500, connectTimeoutMs: 2_000 });
  t.teardown(() => redis.disconnect());
  await redis.set("written", "here");
  const inspect = new Redis(server.url, { lazyConnect: true });
  t.teardown(() => inspect.disconnect());
  await inspect.connect();
  t.equal(await inspect.exists("written"), 0, "nothing in database 0");
  await inspect.select(3);
  t.equal(await inspect.get("written"), "here", "the write is in database 3");
});

t.test("a wrong or missing password is named in words, at the first answer, and the password is never shown", async (t) => {
  const server = await privateRedis(t, { args: ["--requirepass", PASSWORD] });
  const admin = `redis://:${PASSWORD}@127.0.0.1:${server.port}`;
  const before = await connectionsReceived(t, admin);

  const wrong = await refusal(`redis://:wrong-${PASSWORD}@127.0.0.1:${server.port}`, 60_000);
  t.equal(
    wrong,
    `cannot use Redis at redis://:***@127.0.0.1:${server.port}: wrong password (or user name): the server refused the credentials in the URL`,
  );
  const wrongUser = await refusal(`redis://nobody:${PASSWORD}@127.0.0.1:${server.port}`, 60_000);
  t.match(wrongUser, /wrong password \(or user name\)/);
  t.notMatch(wrongUser, PASSWORD);
  const missing = await refusal(`redis://127.0.0.1:${server.port}`, 60_000);
  t.equal(
    missing,
    `cannot use Redis at redis://127.0.0.1:${server.port}: the server needs a password and the URL gives none (redis://:<password>@host)`,
  );

  // The deadline was a minute: had any of the three retried, the server would have seen more than one connection each.
  t.equal((await connectionsReceived(t, admin)) - before - 1, 3, "one connection per attempt: no retry of a definitive refusal");
  const redis = await connectRedis({ url: admin, commandTimeoutMs: 500, connectTimeoutMs: 2_000 });
  t.equal(await redis.ping(), "PONG", "the right password connects");
  redis.disconnect();
});

t.test(
  "nothing listening is retried until the deadline, then named with host and port; a Redis that starts meanwhile is used",
  async (t) => {
    const port = await freePort();
    t.equal(
      await refusal(`redis://127.0.0.1:${port}`, 300),
      `cannot use Redis at redis://127.0.0.1:${port}: nothing is listening on 127.0.0.1:${port} (connection refused), still after 300 ms of retrying`,
    );

    const later = await freePort();
    const connecting = connectRedis({ url: `redis://127.0.0.1:${later}`, commandTimeoutMs: 500, connectTimeoutMs: 20_000 });
    const server = await privateRedis(t, { port: later });
    const redis = await connecting;
    t.teardown(() => redis.disconnect());
    t.equal(await redis.ping(), "PONG", `connected once the server on ${server.port} was up`);
  },
);

t.test("an unknown host is named at once", async (t) => {
  t.equal(
    await refusal("redis://keygate-test.invalid:6379", 60_000),
    "cannot use Redis at redis://keygate-test.invalid:6379: unknown host 'keygate-test.invalid' (the name does not resolve)",
  );
});

t.test("a server that never answers is named as such once the deadline passes", async (t) => {
  const hole = await blackHole(t);
  const port = new URL(hole.url).port;
  t.equal(await refusal(hole.url, 300), `cannot use Redis at ${hole.url}: no answer from 127.0.0.1:${port} within 300 ms`);
});
