import { BlockList, isIPv4, isIPv6 } from "node:net";

/**
 * Addresses a webhook must not reach unless the operator allows it: loopback, private, carrier-grade NAT,
 * link-local (cloud metadata services live there), unspecified, multicast and reserved ranges, IPv4 and IPv6.
 */
const REFUSED = new BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  REFUSED.addSubnet(network, prefix, "ipv4");
}
for (const [network, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10],
  ["ff00::", 8],
  ["64:ff9b::", 96],
  ["2001:db8::", 32],
] as const) {
  REFUSED.addSubnet(network, prefix, "ipv6");
}

/** An IPv4 address written inside IPv6 (`::ffff:10.0.0.1`, `::ffff:a00:1`), as IPv4; null for any other. */
function embeddedIpv4(address: string): string | null {
  const lower = address.toLowerCase();
  const dotted = /^(?:0*:)*:?ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower) ?? /^::(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted) return dotted[1] as string;
  const hex = /^(?:0*:)*:?ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (!hex) return null;
  const high = Number.parseInt(hex[1] as string, 16);
  const low = Number.parseInt(hex[2] as string, 16);
  return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
}

/** Whether `address` (an IP literal) is one a webhook may not reach by default; anything that is not an IP is. */
export function isPrivateAddress(address: string): boolean {
  const bare = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address;
  if (isIPv4(bare)) return REFUSED.check(bare, "ipv4");
  if (!isIPv6(bare)) return true;
  const mapped = embeddedIpv4(bare);
  if (mapped !== null) return REFUSED.check(mapped, "ipv4");
  return REFUSED.check(bare, "ipv6");
}
