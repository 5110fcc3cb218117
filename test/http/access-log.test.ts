import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { captureLog, LEVELS } from "../helpers/log.js";
import { startUpstream } from "../helpers/upstream.js";

// logging.requests: one structured line per request (or a sample of them), with the key id and never the key.

const API = "api_access_log";

async function loggingHarness(t: Test, requests: boolean | number) {
  const log = captureLog();
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    log: log.stream,
    config: {
      logging: { level: "info", requests },
      apis: [{ id: API, name: "access-log", workspaceId: "ws_test" }],
      routes: [{ name: "orders", match: { prefix: "/orders" }, upstream: upstream.url, apiId: API }],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const accessLines = () => log.lines().filter((line) => line.msg === "request");
  return { h, base, accessLines, log };
}

t.test("on: one line per request with face, route, status, duration, key id and client; never the key", async (t) => {
  const { h, base, accessLines, log } = await loggingHarness(t, true);
  const { key, keyId } = await createKey(h, API);
  const created = accessLines().length;
  const response = await fetch(`${base}/orders/7?page=2`, { headers: { authorization: `Bearer ${key}` } });
  await response.text();
  await h.call("keys.verifyKey", { key });

  const lines = accessLines().slice(created);
  t.equal(lines.length, 2, "one line for each request");
  const [gatewayLine, v2Line] = lines as unknown as [Record<string, unknown>, Record<string, unknown>];
  t.match(gatewayLine, {
    level: LEVELS.info,
    face: "gateway",
    route: "orders",
    method: "GET",
    url: "/orders/7?page=2",
    status: 200,
    keyId,
    client: "127.0.0.1",
  });
  t.equal(gatewayLine.requestId, response.headers.get("x-request-id"), "under the request's id");
  t.type(gatewayLine.durationMs, "number");
  t.match(v2Line, { face: "v2", route: "keys.verifyKey", status: 200 });
  t.type(v2Line.keyId, "string", "the root key's id for /v2");
  t.notOk(log.text().includes(key), "the key is nowhere in the log");
});

t.test("off: no request lines", async (t) => {
  const { h, accessLines } = await loggingHarness(t, false);
  await h.call("keys.verifyKey", { key: "sk_nope" });
  t.equal(accessLines().length, 0);
});

t.test("a fraction: about that share of requests is logged", async (t) => {
  const { h, accessLines } = await loggingHarness(t, 0.5);
  for (let i = 0; i < 200; i++) await h.app.inject({ method: "GET", url: "/v2/liveness" });
  const logged = accessLines().length;
  // 0 or 200 of 200 at one chance in two each would take odds of 2^-199.
  t.ok(logged > 0 && logged < 200, `${logged} of 200 logged`);
});
