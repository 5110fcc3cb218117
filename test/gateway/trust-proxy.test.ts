import { mkdtempSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t, { type Test } from "tap";
import { ConfigError, validateConfig } from "../../src/config/load.js";
import { reloadRoutes } from "../../src/config/reload.js";
import { clientAddress, compileTrust, TRUST_EVERY_HOP_WARNING, trustProxyProblems } from "../../src/gateway/client-address.js";
import { CurrentGatewaySnapshot, compileGatewaySnapshot } from "../../src/gateway/gateway-snapshot.js";
import { LONGEST_WINDOW_MS } from "../helpers/clock.js";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { startServer } from "../helpers/process.js";
import { startUpstream } from "../helpers/upstream.js";

const API = "api_trust_proxy";

t.test("the client is the nearest address that is not a trusted proxy", async (t) => {
  const chain = "198.51.100.1, 203.0.113.5, 10.1.2.3";
  const from = (setting: Parameters<typeof compileTrust>[0], peer = "127.0.0.1", forwardedFor: string | undefined = chain) =>
    clientAddress(peer, forwardedFor, compileTrust(setting));
  t.equal(from(false), "127.0.0.1", "false: the connection's peer, whatever X-Forwarded-For says");
  t.equal(from(0), "127.0.0.1", "0 hops: the same");
  t.equal(from(true), "198.51.100.1", "true: the farthest entry, which the client wrote itself");
  t.equal(from(1), "10.1.2.3", "1 hop: the entry the peer appended");
  t.equal(from(2), "203.0.113.5");
  t.equal(from(9), "198.51.100.1", "more hops than the chain: the farthest entry");
  t.equal(from(["127.0.0.1"]), "10.1.2.3", "an address");
  t.equal(from("loopback"), "10.1.2.3", "a named range");
  t.equal(
    from(["127.0.0.0/8", "10.0.0.0/8"]),
    "203.0.113.5",
    "CIDR ranges: both proxies trusted, the spoofable first entry is not reached",
  );
  t.equal(from("127.0.0.1, uniquelocal"), "203.0.113.5", "one comma-separated string");
  t.equal(from("loopback", "::ffff:127.0.0.1"), "10.1.2.3", "an IPv4-mapped peer is its IPv4 address");
  t.equal(from(["loopback"], "192.0.2.9"), "192.0.2.9", "an untrusted peer is the client: its X-Forwarded-For counts for nothing");
  t.equal(clientAddress("127.0.0.1", undefined, compileTrust(true)), "127.0.0.1", "no X-Forwarded-For: the peer");
  t.equal(clientAddress(undefined, chain, compileTrust(true)), "unknown", "a socket already gone");
});

t.test("a bad trustProxy is refused at start-up with its path", async (t) => {
  t.same(trustProxyProblems(["10.0.0.0/33", "loopback", "nonsense"]), [
    "gateway.trustProxy[0]: '10.0.0.0/33' is not an IP address, a CIDR range (10.0.0.0/8) or one of loopback, linklocal, uniquelocal",
    "gateway.trustProxy[2]: 'nonsense' is not an IP address, a CIDR range (10.0.0.0/8) or one of loopback, linklocal, uniquelocal",
  ]);
  const problems = (trustProxy: unknown) => {
    try {
      validateConfig({ gateway: { trustProxy } });
    } catch (error) {
      if (error instanceof ConfigError) return error.problems;
      throw error;
    }
    return [];
  };
  t.same(problems("10.0.0.1, 300.1.1.1"), [
    "gateway.trustProxy: '300.1.1.1' is not an IP address, a CIDR range (10.0.0.0/8) or one of loopback, linklocal, uniquelocal",
  ]);
  t.same(problems({ hops: 1 }), ["gateway.trustProxy: must be a boolean or an integer or a string or an array"]);
  t.same(problems(-1), ["gateway.trustProxy: must be greater than or equal to 0"]);
  t.same(problems([]), ["gateway.trustProxy: must contain at least 1 item"]);
  t.same(problems(["127.0.0.1", "10.0.0.0/8", "uniquelocal"]), [], "addresses, ranges and names are fine");
});

/** A route counting requests per client address (limit 5), on an app with `trustProxy`. */
async function gateway(t: Test, trustProxy: unknown) {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    config: {
      apis: [{ id: API, name: "trust-proxy", workspaceId: "ws_test" }],
      routes: [
        {
          name: "per-ip",
          match: { prefix: "/ip" },
          upstream: upstream.url,
          apiId: API,
          namespaceLimits: [{ namespace: "per-ip", identifier: "ip", limit: 5, duration: LONGEST_WINDOW_MS }],
        },
      ],
      gateway: { trustProxy },
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const { key } = await createKey(h, API);
  /** 20 requests as a trusted proxy at 127.0.0.1 would send them for client 10.9.9.9, each with another spoofed first entry. */
  const spoofed = async () => {
    const statuses: number[] = [];
    const forwardedFor: string[] = [];
    for (let i = 0; i < 20; i++) {
      const response = await fetch(`${base}/ip/x`, {
        headers: { authorization: `Bearer ${key}`, "x-forwarded-for": `198.51.100.${i}, 10.9.9.9` },
      });
      statuses.push(response.status);
      if (response.status === 200)
        forwardedFor.push(((await response.json()) as { headers: Record<string, string> }).headers["x-forwarded-for"] as string);
      else await response.arrayBuffer();
    }
    return {
      passed: statuses.filter((status) => status === 200).length,
      limited: statuses.filter((status) => status === 429).length,
      forwardedFor,
    };
  };
  /** What the per-ip namespace has counted for `identifier`: the remaining of one more call with the same limit. */
  const remainingFor = async (identifier: string) =>
    (await h.call("ratelimit.limit", { namespace: "per-ip", identifier, limit: 5, duration: LONGEST_WINDOW_MS, cost: 0 })).body.data
      .remaining as number;
  return { spoofed, remainingFor };
}

for (const [form, trustProxy] of [
  ["a hop count", 1],
  ["an address", ["127.0.0.1"]],
  ["a CIDR range", "127.0.0.0/8"],
  ["a named range", ["loopback"]],
] as const) {
  t.test(`behind one trusted hop (${form}), a spoofed first X-Forwarded-For entry does not change the client`, async (t) => {
    const gw = await gateway(t, trustProxy);
    const { passed, limited, forwardedFor } = await gw.spoofed();
    t.same([passed, limited], [5, 15], "exactly 5 of 20 pass a per-IP limit of 5");
    t.equal(await gw.remainingFor("10.9.9.9"), 0, "all of them counted for the client the trusted proxy reported");
    t.equal(await gw.remainingFor("198.51.100.0"), 5, "none for a spoofed entry");
    t.same(
      forwardedFor,
      [0, 1, 2, 3, 4].map((i) => `198.51.100.${i}, 10.9.9.9, 127.0.0.1`),
      "the upstream gets what the client sent, then the peer keygate talked to",
    );
  });
}

t.test("trustProxy: true keeps trusting every hop (any client chooses its address), and says so", async (t) => {
  const gw = await gateway(t, true);
  const { passed, forwardedFor } = await gw.spoofed();
  t.equal(passed, 20, "every spoofed first entry is another client");
  t.equal(forwardedFor[3], "198.51.100.3, 10.9.9.9, 127.0.0.1", "the upstream still gets the real peer appended");

  const lines: { level: string; message: string }[] = [];
  const log = { info: () => {}, warn: (_details: object, message: string) => lines.push({ level: "warn", message }), error: () => {} };
  const running = validateConfig({});
  const state = new CurrentGatewaySnapshot(compileGatewaySnapshot(running));
  reloadRoutes(state, running, () => validateConfig({ gateway: { trustProxy: true } }), log);
  t.same(lines, [{ level: "warn", message: TRUST_EVERY_HOP_WARNING }], "a reload that turns it on warns");
  t.equal(state.current.trust("203.0.113.1", 5), true, "and the reloaded snapshot trusts every hop");
  reloadRoutes(state, running, () => validateConfig({ gateway: { trustProxy: 1 } }), log);
  t.equal(state.current.trust("203.0.113.1", 1), false, "a reload to a hop count applies at once");
});

t.test("keygate started with trustProxy: true warns in its log", async (t) => {
  const path = join(mkdtempSync(join(tmpdir(), "keygate-trust-")), "keygate.yaml");
  writeFileSync(
    path,
    "gateway: { trustProxy: true, watchConfig: false }\nanalytics: { engine: off }\nrootKeys:\n  - { key: root_trust_proxy_test, workspaceId: ws_trust, permissions: ['*'] }\n",
  );
  const server = await startServer(t, { KEYGATE_CONFIG: path });
  const warning = server
    .stdout()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as { level: number; msg: string })
    .find((line) => line.msg === TRUST_EVERY_HOP_WARNING);
  t.equal(warning?.level, 40, "one warn line");
  t.equal((await server.stop()) ?? 0, 0);
});
