import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import type { GatewaySettings } from "../../src/gateway/route-config.js";
import { assertError, assertInvalidAt } from "../helpers/assertions.js";
import { createKey, getKey } from "../helpers/fixtures.js";
import { type CallResult, type Harness, harness } from "../helpers/harness.js";
import { getResult } from "../helpers/http-client.js";
import { rawRequest, sendUntilClosed } from "../helpers/raw-http.js";
import { startUpstream, type Upstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

// Routes made through the API may not reach the operator's network (loopback, private, link-local, reserved
// addresses, names resolving to them): refused when written, and at every connection. Only the configuration file's
// gateway.apiRoutes.allowedUpstreams opens it, exactly as far as it names.

interface Setup {
  h: Harness;
  port: number;
  upstream: Upstream;
  send(path: string, headers?: Record<string, string>): Promise<CallResult>;
  /** Puts `allowedUpstreams` in force, as a reload of the configuration file would. */
  allow(allowedUpstreams: string[]): void;
}

async function setup(t: Test, allowedUpstreams: string[], gateway: Record<string, unknown> = {}): Promise<Setup> {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    config: {
      routes: [{ name: "from-file", match: { prefix: "/file" }, upstream: upstream.url, workspaceId: "ws_test" }],
      gateway: { apiRoutes: { allowedUpstreams }, ...gateway },
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const port = (h.app.server.address() as AddressInfo).port;
  return {
    h,
    port,
    upstream,
    send: (path, headers = {}) => getResult(`http://127.0.0.1:${port}${path}`, headers),
    allow(list) {
      const settings: GatewaySettings = { ...h.config.gateway, apiRoutes: { allowedUpstreams: list } };
      h.app.gatewaySnapshot.applyConfig({ routes: h.config.routes, gateway: settings });
    },
  };
}

const route = (upstream: unknown, extra: Record<string, unknown> = {}) => ({ name: "r", match: { prefix: "/r" }, upstream, ...extra });

t.test(
  "a route made through the API to a loopback, private, link-local or reserved address is refused with a 400 naming field and address",
  async (t) => {
    const s = await setup(t, []);
    const targets = [
      ["http://127.0.0.1:6379", "127.0.0.1"],
      ["http://169.254.169.254/latest/meta-data", "169.254.169.254"],
      ["http://10.1.2.3", "10.1.2.3"],
      ["http://172.16.0.1:8080", "172.16.0.1"],
      ["http://192.168.1.1", "192.168.1.1"],
      ["http://100.64.0.1", "100.64.0.1"],
      ["http://0.0.0.0:8080", "0.0.0.0"],
      ["http://240.0.0.1", "240.0.0.1"],
      ["http://[::1]:8080", "::1"],
      ["http://[fd00::1]", "fd00::1"],
      ["http://[fe80::1]", "fe80::1"],
      ["http://[::ffff:127.0.0.1]", "::ffff:7f00:1"],
      ["http://2130706433", "127.0.0.1"],
    ];
    for (const [upstream, address] of targets) {
      const refused = await s.h.call("keygate.createRoute", route(upstream));
      assertInvalidAt(t, refused, "body.upstream", new RegExp(`is at ${(address as string).replace(/\./g, "\\.")}, a loopback, private`));
      t.match(refused.body.error.errors[0].message, /gateway\.apiRoutes\.allowedUpstreams/, "the message says how the operator lifts it");
    }
    const byName = await s.h.call("keygate.createRoute", route(`http://localhost:${s.port}/v2`));
    assertInvalidAt(t, byName, "body.upstream", /'localhost:\d+' resolves to (127\.0\.0\.1|::1), a loopback, private/);

    const pool = await s.h.call(
      "keygate.createRoute",
      route({ targets: [{ url: "http://203.0.113.7" }, { url: "http://169.254.169.254" }] }, { name: "pool" }),
    );
    assertInvalidAt(t, pool, "body.upstream.targets[1].url", /169\.254\.169\.254/);

    const publicRoute = await s.h.call("keygate.createRoute", route("http://203.0.113.7:8080", { name: "public" }));
    t.equal(publicRoute.status, 200, "a public address is taken");
    const moved = await s.h.call("keygate.updateRoute", { route: "public", upstream: "http://127.0.0.1:6379" });
    assertInvalidAt(t, moved, "body.upstream", /127\.0\.0\.1/);
    t.equal((await s.h.call("keygate.listRoutes", {})).body.data.filter((each: { source: string }) => each.source === "api").length, 1);
    t.equal((await s.send("/file/x")).status, 200, "a route of the configuration file reaches loopback: it is the operator's");
  },
);

t.test("gateway.apiRoutes.allowedUpstreams lets through exactly what it names", async (t) => {
  const s = await setup(t, ["127.0.0.1/32", "10.0.0.0/8", "backend.internal", "*.svc.cluster.local", "fd00::/8"]);
  let routes = 0;
  const created = (upstream: string) => {
    routes++;
    return s.h.call("keygate.createRoute", { name: `r${routes}`, match: { prefix: `/r${routes}` }, upstream });
  };
  for (const upstream of [
    "http://127.0.0.1:6379",
    "http://10.200.0.1",
    "http://backend.internal:8080",
    "http://orders.svc.cluster.local",
    "http://[fd12::1]",
  ]) {
    t.equal((await created(upstream)).status, 200, `${upstream} is allowed`);
  }
  for (const upstream of ["http://127.0.0.2", "http://172.16.0.1", "http://169.254.169.254", "http://[::1]"]) {
    assertInvalidAt(t, await created(upstream), "body.upstream");
  }
});

t.test("an entry of gateway.apiRoutes.allowedUpstreams that is neither address, range nor name stops the configuration", async (t) => {
  const { validateConfig } = await import("../../src/config/load.js");
  const { problemsOf } = await import("../helpers/config.js");
  const problems = problemsOf(() =>
    validateConfig({ gateway: { apiRoutes: { allowedUpstreams: ["10.0.0.0/33", "bad host!", "::1/129", "ok.internal"] } } }, "test"),
  );
  t.match(problems, [
    /^gateway\.apiRoutes\.allowedUpstreams\[0\]: '10\.0\.0\.0\/33' has a prefix length outside 0-32/,
    /^gateway\.apiRoutes\.allowedUpstreams\[1\]: 'bad host!' is not an IP address, a CIDR range/,
    /^gateway\.apiRoutes\.allowedUpstreams\[2\]: '::1\/129' has a prefix length outside 0-128/,
  ]);
  t.equal(problems.length, 3);
});

t.test("every connection is checked again: a route whose address the list no longer names gets 502, its credits back", async (t) => {
  const s = await setup(t, ["127.0.0.1/32", "localhost"]);
  const apiId = (await s.h.call("apis.createApi", { name: "guarded" })).body.data.apiId as string;
  const { key, keyId } = await createKey(s.h, apiId, { credits: { remaining: 10 } });
  const policies = [{ name: "auth", enabled: true, keyauth: { keyspaces: [apiId] } }];
  t.equal((await s.h.call("keygate.createRoute", route(s.upstream.url, { policies }))).status, 200);
  const named = s.upstream.url.replace("127.0.0.1", "localhost");
  t.equal((await s.h.call("keygate.createRoute", { name: "named", match: { prefix: "/named" }, upstream: named, policies })).status, 200);
  const bearer = { authorization: `Bearer ${key}` };
  t.equal((await s.send("/r/x", bearer)).status, 200, "reached while the list names it");
  t.equal((await s.send("/named/x", bearer)).status, 200, "reached by name while the list names it");
  t.equal((await getKey(s.h, keyId)).credits.remaining, 8);

  s.allow([]);
  const seen = s.upstream.seen.length;
  for (const path of ["/r/x", "/named/x"]) {
    const refused = await s.send(path, bearer);
    assertError(t, refused, "err:keygate:gateway:upstream_unreachable", /is at an address that routes made through the API may not reach/);
    t.notMatch(refused.body.error.detail, /127\.0\.0\.1/, "the address stays in the log");
  }
  t.equal(s.upstream.seen.length, seen, "nothing reached the upstream");
  t.equal((await getKey(s.h, keyId)).credits.remaining, 8, "the credits of both refused requests came back");

  const upgrade = await sendUntilClosed(
    s.port,
    rawRequest("GET", "/r/socket", [
      ["Host", "keygate.test"],
      ["Connection", "Upgrade"],
      ["Upgrade", "websocket"],
      ["Sec-WebSocket-Version", "13"],
      ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="],
      ["Authorization", `Bearer ${key}`],
    ]),
  );
  t.equal(upgrade.status, 502, "an upgrade is refused too");
  t.match(JSON.parse(upgrade.body).error.detail, /may not reach/);
  t.equal(s.upstream.seen.length, seen);
  t.equal((await getKey(s.h, keyId)).credits.remaining, 8, "and its credits came back");

  s.allow(["127.0.0.1/32", "localhost"]);
  t.equal((await s.send("/r/x", bearer)).status, 200, "a reload that names it again opens it again");
});

t.test("the active health probes of a route made through the API obey the guard", async (t) => {
  const s = await setup(t, ["127.0.0.1/32", "localhost"]);
  const other = await startUpstream(t);
  const targets = [{ url: s.upstream.url }, { url: other.url.replace("127.0.0.1", "localhost") }];
  const upstream = { targets, health: { active: { path: "/health", intervalMs: 100, unhealthyThreshold: 2 } } };
  t.equal((await s.h.call("keygate.createRoute", route(upstream))).status, 200);
  const probes = (server: Upstream) => server.seen.filter((request) => request.url === "/health").length;
  const health = async () => (await s.h.call("keygate.getRoute", { route: "r" })).body.data.upstreamHealth as { probedHealthy: boolean }[];
  await waitFor("both targets are probed", 10_000, () => (probes(s.upstream) > 0 && probes(other) > 0 ? true : undefined));

  s.allow(["localhost"]);
  const [first] = await waitFor("the target at 127.0.0.1 is taken out by its probes", 10_000, async () => {
    const targets = await health();
    return targets[0]?.probedHealthy === false ? targets : undefined;
  });
  t.equal(first?.probedHealthy, false);
  const refusedSince = probes(s.upstream);
  const named = probes(other);
  await waitFor("three more rounds of probes", 10_000, () => (probes(other) >= named + 3 ? true : undefined));
  t.equal(probes(s.upstream), refusedSince, "no probe reached the target the list no longer names");
  t.equal((await health())[1]?.probedHealthy, true, "the target the list names by name passes its probes");
});
