import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { validateConfig } from "../../src/config/load.js";
import { reloadRoutes } from "../../src/config/reload.js";
import { CurrentGatewaySnapshot, compileGatewaySnapshot } from "../../src/gateway/gateway-snapshot.js";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor, within } from "../helpers/wait.js";

const API = "api_reload_test";

function capturingLog() {
  const lines: { level: string; message: string; details: object }[] = [];
  const at = (level: string) => (details: object, message: string) => lines.push({ level, message, details });
  return { lines, log: { info: at("info"), warn: at("warn"), error: at("error") } };
}

t.test("a reload applies routes and gateway settings, refuses an invalid file, and flags sections that need a restart", async (t) => {
  const route = (name: string) => ({ name, match: { prefix: `/${name}` }, upstream: "http://127.0.0.1:1", apiId: API });
  const running = validateConfig({ routes: [route("one")] });
  const state = new CurrentGatewaySnapshot(compileGatewaySnapshot(running));
  const { lines, log } = capturingLog();

  t.equal(
    reloadRoutes(state, running, () => validateConfig({ routes: [route("two")], gateway: { upstreamTimeoutMs: 1234 } }), log),
    true,
  );
  t.same(
    state.current.table.routes.map((r) => r.name),
    ["two"],
  );
  t.equal(state.current.settings.upstreamTimeoutMs, 1234);

  const before = state.current;
  t.equal(
    reloadRoutes(state, running, () => validateConfig({ routes: [{ ...route("bad"), match: { prefix: "/v2/x" } }] }), log),
    false,
  );
  t.equal(state.current, before, "an invalid file leaves the routes in force");
  t.match(lines.at(-1), { level: "error", message: /invalid; the routes in force stay/ });

  reloadRoutes(state, running, () => validateConfig({ routes: [route("three")], server: { port: 9999 } }), log);
  t.same(
    state.current.table.routes.map((r) => r.name),
    ["three"],
  );
  t.match(
    lines.find((line) => line.level === "warn"),
    { message: /take effect after a restart/, details: { sections: ["server"] } },
  );
});

t.test("swapping the routes under load fails no request", async (t) => {
  const first = await startUpstream(t);
  const second = await startUpstream(t);
  const config = (upstream: string) => ({ name: "svc", match: { prefix: "/svc" }, upstream, apiId: API });
  const h = await harness(t, { config: { apis: [{ id: API, name: "reload", workspaceId: "ws_test" }], routes: [config(first.url)] } });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const { key } = await createKey(h, API);
  const tables = [first.url, second.url].map((url) => compileGatewaySnapshot({ routes: [config(url)], gateway: h.config.gateway }));

  let swaps = 0;
  let swapping = true;
  const swapper = (async () => {
    while (swapping) {
      h.app.gatewaySnapshot.replace(tables[swaps++ % 2] as (typeof tables)[number]);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  })();
  const statuses: number[] = [];
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      for (let i = 0; i < 25; i++) {
        // Some requests take long enough that the routes change while they are at the upstream.
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

interface NamedUpstream {
  url: string;
  /** The paths it received, in order. */
  seen: string[];
  /** Lets every answer it holds go (and those it will be asked for after). */
  release(): void;
}

/** An upstream that answers every request with `{ upstream: name, url }`; with `hold`, only once release() is called. */
async function namedUpstream(t: Test, name: string, hold = false): Promise<NamedUpstream> {
  const seen: string[] = [];
  let released: () => void = () => {};
  const gate = hold ? new Promise<void>((resolve) => (released = resolve)) : Promise.resolve();
  const server = createServer((request, response) => {
    seen.push(request.url ?? "");
    request.resume();
    void gate.then(() =>
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ upstream: name, url: request.url })),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => {
    released();
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, release: () => released() };
}

t.test(
  "a request in flight when the routes change goes on to the upstream it began with; the next request takes the new routes",
  async (t) => {
    const old = await namedUpstream(t, "old", true);
    const replacement = await namedUpstream(t, "new");
    const route = (upstream: string) => ({ name: "svc", match: { prefix: "/svc" }, upstream, apiId: API });
    const h = await harness(t, { config: { apis: [{ id: API, name: "reload", workspaceId: "ws_test" }], routes: [route(old.url)] } });
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
    const inFlight = await createKey(h, API);
    const later = await createKey(h, API);
    const get = (path: string, key: string) => fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}` } });

    // The in-flight request is held inside keygate while its key is verified, after the gateway has begun it and
    // before it is forwarded: the routes change at that moment.
    const verification = h.app.services.verification;
    const verify = verification.verify.bind(verification);
    let entered: () => void = () => {};
    const verifying = new Promise<void>((resolve) => (entered = resolve));
    let letGo: () => void = () => {};
    const swapped = new Promise<void>((resolve) => (letGo = resolve));
    verification.verify = async (request) => {
      if (request.key === inFlight.key) {
        entered();
        await swapped;
      }
      return verify(request);
    };

    const first = get("/svc/in-flight", inFlight.key);
    await within(5_000, "the first request being verified", verifying);
    h.app.gatewaySnapshot.replace(compileGatewaySnapshot({ routes: [route(replacement.url)], gateway: h.config.gateway }));
    letGo();
    await waitFor("the first request reaching an upstream", 5_000, () =>
      old.seen.length + replacement.seen.length > 0 ? true : undefined,
    );
    t.same(old.seen, ["/svc/in-flight"], "the request begun before the swap reached the old upstream");

    // The old upstream still holds its answer: the next request is served on the new routes meanwhile.
    const second = await get("/svc/after", later.key);
    t.equal(second.status, 200);
    t.same(await second.json(), { upstream: "new", url: "/svc/after" }, "a request begun after the swap reaches the new upstream");

    old.release();
    const answered = await first;
    t.equal(answered.status, 200);
    t.same(await answered.json(), { upstream: "old", url: "/svc/in-flight" }, "and the first is answered by the old one");
    t.same(replacement.seen, ["/svc/after"]);
  },
);
