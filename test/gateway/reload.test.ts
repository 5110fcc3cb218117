import type { AddressInfo } from "node:net";
import t from "tap";
import { validateConfig } from "../../src/config/load.js";
import { reloadRoutes } from "../../src/gateway/reload.js";
import { compileGatewayState, RouteState } from "../../src/gateway/route-state.js";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";

const API = "api_reload_test";

function capturingLog() {
  const lines: { level: string; message: string; details: object }[] = [];
  const at = (level: string) => (details: object, message: string) => lines.push({ level, message, details });
  return { lines, log: { info: at("info"), warn: at("warn"), error: at("error") } };
}

t.test("a reload applies routes and gateway settings, refuses an invalid file, and flags sections that need a restart", async (t) => {
  const route = (name: string) => ({ name, match: { prefix: `/${name}` }, upstream: "http://127.0.0.1:1", apiId: API });
  const running = validateConfig({ routes: [route("one")] });
  const state = new RouteState(compileGatewayState(running));
  const { lines, log } = capturingLog();

  t.equal(reloadRoutes(state, running, () => validateConfig({ routes: [route("two")], gateway: { upstreamTimeoutMs: 1234 } }), log), true);
  t.same(state.current.table.routes.map((r) => r.name), ["two"]);
  t.equal(state.current.settings.upstreamTimeoutMs, 1234);

  const before = state.current;
  t.equal(reloadRoutes(state, running, () => validateConfig({ routes: [{ ...route("bad"), match: { prefix: "/v2/x" } }] }), log), false);
  t.equal(state.current, before, "an invalid file leaves the routes in force");
  t.match(lines.at(-1), { level: "error", message: /invalid; the routes in force stay/ });

  reloadRoutes(state, running, () => validateConfig({ routes: [route("three")], server: { port: 9999 } }), log);
  t.same(state.current.table.routes.map((r) => r.name), ["three"]);
  t.match(lines.find((line) => line.level === "warn"), { message: /take effect after a restart/, details: { sections: ["server"] } });
});

t.test("swapping the routes under load fails no request; requests in flight finish on the routes they began with", async (t) => {
  const first = await startUpstream(t);
  const second = await startUpstream(t);
  const config = (upstream: string) => ({ name: "svc", match: { prefix: "/svc" }, upstream, apiId: API });
  const h = await harness(t, { config: { apis: [{ id: API, name: "reload", workspaceId: "ws_test" }], routes: [config(first.url)] } });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const { key } = await createKey(h, API);
  const tables = [first.url, second.url].map((url) => compileGatewayState({ routes: [config(url)], gateway: h.config.gateway }));

  let swaps = 0;
  let swapping = true;
  const swapper = (async () => {
    while (swapping) {
      h.app.gatewayRoutes.replace(tables[swaps++ % 2] as (typeof tables)[number]);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  })();
  const statuses: number[] = [];
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      for (let i = 0; i < 25; i++) {
        // Some requests take long enough that the routes change while they are in flight.
        const path = i % 5 === 0 ? "/svc/slow/30" : "/svc/x";
        statuses.push((await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}` } })).status);
      }
    }),
  );
  swapping = false;
  await swapper;
  t.same([...new Set(statuses)], [200], `${statuses.length} requests, all answered 200, across ${swaps} swaps`);
  t.ok(first.seen.length > 0 && second.seen.length > 0, `both upstreams served (${first.seen.length} and ${second.seen.length})`);
});
