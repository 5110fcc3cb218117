import type { AddressInfo } from "node:net";
import t from "tap";
import WebSocket from "ws";
import { assertError } from "../helpers/assertions.js";
import { harness, ROOT_KEY, WORKSPACE } from "../helpers/harness.js";
import { captureLog, LEVELS } from "../helpers/log.js";
import { privateRedis } from "../helpers/redis-server.js";
import { startUpstream } from "../helpers/upstream.js";

const API = "api_logged_causes";

t.test("every 5xx during a frozen Redis logs its cause under the request id: 500 at error, 503 at warn, no secret", async (t) => {
  const redis = await privateRedis(t);
  const upstream = await startUpstream(t);
  const log = captureLog();
  const h = await harness(t, {
    storage: "redis",
    log: log.stream,
    config: {
      storage: {
        redis: {
          url: redis.url,
          prefix: "kgtest:logged-causes",
          commandTimeoutMs: 200,
          connectTimeoutMs: 2_000,
          breaker: { failureThreshold: 3, openMs: 200 },
        },
      },
      ratelimit: { fail: "closed" },
      apis: [{ id: API, name: "causes", workspaceId: WORKSPACE }],
      routes: [{ name: "svc", match: { prefix: "/svc" }, upstream: upstream.url, apiId: API }],
      logging: { level: "info" },
    },
  });
  const created = await h.call("keys.createKey", { apiId: API, credits: { remaining: 10 } });
  const key = created.body.data.key as string;
  const uncached = (await h.call("keys.createKey", { apiId: API })).body.data.key as string;
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const port = (h.app.server.address() as AddressInfo).port;
  t.equal((await h.call("keys.verifyKey", { key, credits: { cost: 0 } })).body.data.valid, true, "the key is in the cache");
  t.equal(
    (await h.call("ratelimit.limit", { namespace: "causes", identifier: "a", limit: 5, duration: 60_000 })).status,
    200,
    "the namespace is known",
  );

  redis.hang();
  t.teardown(() => redis.resume());
  const answers: { result: { status: number; headers: Record<string, unknown>; body: unknown }; code: string; level: number }[] = [
    { result: await h.call("keys.createKey", { apiId: API }), code: "err:unkey:application:service_unavailable", level: LEVELS.error },
    {
      result: await h.call("ratelimit.limit", { namespace: "causes", identifier: "a", limit: 5, duration: 60_000 }),
      code: "err:unkey:data:ratelimit_unavailable",
      level: LEVELS.warn,
    },
    {
      result: await h.call("keys.verifyKey", { key, credits: { cost: 1 } }),
      code: "err:unkey:data:credits_unavailable",
      level: LEVELS.warn,
    },
  ];
  for (const answer of answers) assertError(t, answer.result as never, answer.code as never);
  const upgrade = await new Promise<{ status: number; headers: Record<string, unknown> }>((resolve) => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/svc/ws`, { headers: { authorization: `Bearer ${uncached}` } });
    socket.on("unexpected-response", (_request, response) => resolve({ status: response.statusCode ?? 0, headers: response.headers }));
    socket.on("open", () => resolve({ status: 101, headers: {} }));
    socket.on("error", () => {});
  });
  t.equal(upgrade.status, 500, "a WebSocket upgrade that cannot be verified");
  answers.push({ result: { ...upgrade, body: undefined }, code: "err:unkey:application:service_unavailable", level: LEVELS.error });

  for (const { result, code, level } of answers) {
    const requestId = result.headers["x-request-id"];
    const lines = log.lines().filter((line) => line.requestId === requestId);
    t.equal(lines.length, 1, `${code}: one line under ${requestId}`);
    const line = lines[0];
    t.equal(line?.level, level, "at its level");
    t.equal(line?.code, code, "naming the code");
    t.match(line?.err?.message, /: \S/, `with the cause after the error's own message: ${line?.err?.message}`);
    t.match(line?.err?.stack, /caused by: /, "and the causes' stacks");
  }
  const text = log.text();
  t.notOk(text.includes(ROOT_KEY), "the root key is not in the log");
  t.notOk(text.includes(key) || text.includes(uncached), "nor the keys");
});
