import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { rateLimitedAddress } from "../../src/lib/address-prefix.js";
import { harness } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";

// A per-address rate limit counts an IPv4 client by its address and an IPv6 client by a prefix of its address
// (ratelimit.ipv6PrefixLength, /56 by default): one host rotating through its /64 stays one client.

t.test("the address a limit counts: IPv4 whole, IPv4 inside IPv6 as IPv4, IPv6 by its prefix", async (t) => {
  t.equal(rateLimitedAddress("192.0.2.7", 56), "192.0.2.7");
  t.equal(rateLimitedAddress("::ffff:192.0.2.7", 56), "192.0.2.7");
  t.equal(rateLimitedAddress("::ffff:c000:207", 56), "192.0.2.7");
  t.equal(rateLimitedAddress("2001:db8:aa:bb01::1", 56), "2001:db8:aa:bb00::/56");
  t.equal(rateLimitedAddress("2001:DB8:AA:BBFF:1:2:3:4", 56), "2001:db8:aa:bb00::/56", "any case, any host part");
  t.equal(rateLimitedAddress("2001:db8:aa:bb01::1", 64), "2001:db8:aa:bb01::/64");
  t.equal(rateLimitedAddress("2001:db8:aa:bb01::1", 48), "2001:db8:aa::/48");
  t.equal(rateLimitedAddress("2001:db8:aa:bb01::1", 128), "2001:db8:aa:bb01::1", "/128: the address itself");
  t.equal(rateLimitedAddress("fe80::1%eth0", 56), "fe80::/56", "a zone is no part of it");
  t.equal(rateLimitedAddress("::1", 56), "::/56");
  t.equal(rateLimitedAddress("2001:db8::192.0.2.7", 128), "2001:db8::c000:207");
  t.equal(rateLimitedAddress("1:0:0:2:0:0:0:3", 128), "1:0:0:2::3", "the longest run of zeros is the one left out");
  t.equal(rateLimitedAddress("", 56), "");
});

/** A public route limited to 2 requests a minute per client address, behind a trusted proxy on loopback. */
async function limited(t: Test, ratelimit: Record<string, unknown> = {}) {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    config: {
      ratelimit,
      gateway: { trustProxy: ["loopback"] },
      routes: [
        {
          name: "per-address",
          match: { prefix: "/a" },
          upstream: upstream.url,
          workspaceId: "ws_test",
          namespaceLimits: [{ namespace: "per-address", identifier: "ip", limit: 2, duration: 60_000 }],
        },
      ],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const port = (h.app.server.address() as AddressInfo).port;
  return async (client: string) => (await fetch(`http://127.0.0.1:${port}/a/x`, { headers: { "x-forwarded-for": client } })).status;
}

t.test("two IPv6 addresses in one /56 share a bucket; two /56s do not", async (t) => {
  const send = await limited(t);
  t.equal(await send("2001:db8:aa:bb01::1"), 200);
  t.equal(await send("2001:db8:aa:bb02::2"), 200, "another /64 of the same /56");
  t.equal(await send("2001:db8:aa:bbff:ffff::9"), 429, "a third address of that /56 finds its limit spent");
  t.equal(await send("2001:db8:aa:cc00::1"), 200, "the next /56 has a bucket of its own");
  t.equal(await send("2001:db8:aa:cc00::2"), 200);
  t.equal(await send("2001:db8:aa:cc00::3"), 429);
  t.equal(await send("192.0.2.1"), 200, "IPv4 by address");
  t.equal(await send("::ffff:192.0.2.1"), 200, "the same IPv4 address written inside IPv6 is the same client");
  t.equal(await send("192.0.2.1"), 429);
  t.equal(await send("192.0.2.2"), 200, "the next IPv4 address is another client");
});

t.test("ratelimit.ipv6PrefixLength sets the prefix", async (t) => {
  const send = await limited(t, { ipv6PrefixLength: 64 });
  t.equal(await send("2001:db8:aa:bb01::1"), 200);
  t.equal(await send("2001:db8:aa:bb01::2"), 200);
  t.equal(await send("2001:db8:aa:bb01::3"), 429, "one /64");
  t.equal(await send("2001:db8:aa:bb02::1"), 200, "another /64 of the same /56 is another client");
});
