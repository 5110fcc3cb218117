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

/** An IPv4 address written inside IPv6 as plain IPv4; any other address as it is (brackets taken off). */
function plainAddress(address: string): string {
  const bare = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address;
  return isIPv6(bare) ? (embeddedIpv4(bare) ?? bare) : bare;
}

const HOST_NAME = /^(?:\*\.)?(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.?$/i;

/** Why `entry` is neither an address, a CIDR range nor a host name (`backend.internal`, `*.svc.cluster.local`). */
export function allowanceEntryProblem(entry: string): string | undefined {
  const [address = "", prefix, ...rest] = entry.split("/");
  const family = isIPv4(address) ? 4 : isIPv6(address) ? 6 : 0;
  if (family === 0) {
    if (prefix === undefined && HOST_NAME.test(entry)) return undefined;
    return "is not an IP address, a CIDR range (10.0.0.0/8, fd00::/8) or a host name (backend.internal, *.svc.cluster.local)";
  }
  if (rest.length > 0 || (prefix !== undefined && (!/^\d{1,3}$/.test(prefix) || Number(prefix) > (family === 4 ? 32 : 128)))) {
    return `has a prefix length outside 0-${family === 4 ? 32 : 128}`;
  }
  return undefined;
}

/**
 * Private addresses the operator lets through anyway: addresses and CIDR ranges, and host names (exact, or every
 * name under `*.suffix`), whatever those resolve to. Entries must have passed allowanceEntryProblem.
 */
export class PrivateAddressAllowance {
  private readonly ranges = new BlockList();
  private readonly names = new Set<string>();
  private readonly suffixes: string[] = [];
  readonly entries: readonly string[];

  constructor(entries: readonly string[]) {
    this.entries = [...entries];
    for (const entry of entries) {
      const [address = "", prefix] = entry.split("/");
      const type = isIPv4(address) ? "ipv4" : isIPv6(address) ? "ipv6" : undefined;
      if (type === undefined) {
        const name = entry.toLowerCase().replace(/\.$/, "");
        if (name.startsWith("*.")) this.suffixes.push(name.slice(1));
        else this.names.add(name);
      } else if (prefix === undefined) this.ranges.addAddress(address, type);
      else this.ranges.addSubnet(address, Number(prefix), type);
    }
  }

  /** Whether connections to `host` (a name as written in a URL) are let through whatever it resolves to. */
  allowsHost(host: string): boolean {
    const name = host.toLowerCase().replace(/\.$/, "");
    return this.names.has(name) || this.suffixes.some((suffix) => name.endsWith(suffix));
  }

  /** Whether `address` (an IP) may be reached: it is public, or in one of the ranges. */
  allowsAddress(address: string): boolean {
    if (!isPrivateAddress(address)) return true;
    const plain = plainAddress(address);
    if (isIPv4(plain)) return this.ranges.check(plain, "ipv4");
    return isIPv6(plain) && this.ranges.check(plain, "ipv6");
  }
}

/** Lets nothing private through. */
export const NO_PRIVATE_ADDRESSES = new PrivateAddressAllowance([]);
