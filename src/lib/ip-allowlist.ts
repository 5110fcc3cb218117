import { BlockList, isIP } from "node:net";

/** Entries an allowlist holds at most: enough for any office, VPC or CDN range list, small enough to check fast. */
export const MAX_IP_ALLOWLIST_ENTRIES = 1_000;

const IPV4_MAPPED = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i;

/** Why `entry` is neither an IPv4/IPv6 address nor a CIDR range of one; undefined when it is one. */
export function ipEntryProblem(entry: string): string | undefined {
  const [address = "", prefix, ...rest] = entry.split("/");
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return "is not an IP address or a CIDR range (10.0.0.0/8, 2001:db8::/32)";
  if (prefix === undefined) return undefined;
  const bits = family === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > bits) return `has a prefix length outside 0-${bits}`;
  return undefined;
}

/**
 * A set of addresses and CIDR ranges, IPv4 and IPv6 (node:net's BlockList does the matching). An IPv4 client
 * seen on an IPv6 socket (`::ffff:10.1.2.3`) is matched as its IPv4 address.
 */
export class IpAllowlist {
  private readonly list = new BlockList();
  readonly entries: readonly string[];

  /** Throws on an entry ipEntryProblem refuses. */
  constructor(entries: readonly string[]) {
    this.entries = [...entries];
    for (const entry of entries) {
      const problem = ipEntryProblem(entry);
      if (problem !== undefined) throw new Error(`'${entry}' ${problem}`);
      const [address = "", prefix] = entry.split("/");
      const type = isIP(address) === 4 ? "ipv4" : "ipv6";
      if (prefix === undefined) this.list.addAddress(address, type);
      else this.list.addSubnet(address, Number(prefix), type);
    }
  }

  allows(address: string | undefined): boolean {
    if (address === undefined) return false;
    const mapped = IPV4_MAPPED.exec(address)?.[1];
    const plain = mapped ?? address;
    const family = isIP(plain);
    if (family === 0) return false;
    return this.list.check(plain, family === 4 ? "ipv4" : "ipv6");
  }
}
