import { isIPv6 } from "node:net";

/** The IPv6 prefix a per-address rate limit counts a client by, unless configured: express-rate-limit's default too. */
export const DEFAULT_IPV6_PREFIX_LENGTH = 56;

/**
 * What a per-address rate limit counts a client by: an IPv4 address whole (one written inside IPv6, `::ffff:a.b.c.d`,
 * as IPv4); an IPv6 address by its first `prefixLength` bits, written as its network (`2001:db8:0:ab00::/56`), since
 * one host commonly holds a /64 or more and must not become many clients by rotating through it. Anything else (an
 * IPv4 address, a missing one) as it is.
 */
export function rateLimitedAddress(address: string, prefixLength: number): string {
  if (!address.includes(":")) return address;
  const bare = address.replace(/%.*$/, "");
  if (!isIPv6(bare)) return address;
  const groups = ipv6Groups(bare);
  if (groups.slice(0, 5).every((group) => group === 0) && groups[5] === 0xffff) {
    const [high = 0, low = 0] = groups.slice(6);
    return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
  }
  if (prefixLength >= 128) return compressed(groups);
  const masked = groups.map((group, index) => {
    const kept = Math.min(16, Math.max(0, prefixLength - index * 16));
    return kept === 0 ? 0 : group & ((0xffff << (16 - kept)) & 0xffff);
  });
  return `${compressed(masked)}/${prefixLength}`;
}

/** The eight 16-bit groups of a valid IPv6 address (an IPv4 tail as the last two). */
function ipv6Groups(address: string): number[] {
  const hex = !address.includes(".")
    ? address
    : address.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_all, a: string, b: string, c: string, d: string) => {
        const [first, second] = [(Number(a) << 8) | Number(b), (Number(c) << 8) | Number(d)];
        return `${first.toString(16)}:${second.toString(16)}`;
      });
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((group) => Number.parseInt(group, 16)));
  const [head = "", tail] = hex.split("::");
  if (tail === undefined) return parse(head);
  const [front, back] = [parse(head), parse(tail)];
  return [...front, ...Array<number>(8 - front.length - back.length).fill(0), ...back];
}

/** RFC 5952's text of eight groups: lower-case hex, the longest run of two or more zero groups written `::`. */
function compressed(groups: readonly number[]): string {
  let [start, length] = [-1, 0];
  for (let at = 0; at < 8; ) {
    if (groups[at] !== 0) {
      at++;
      continue;
    }
    let end = at;
    while (end < 8 && groups[end] === 0) end++;
    if (end - at > length && end - at >= 2) [start, length] = [at, end - at];
    at = end;
  }
  const text = (part: readonly number[]) => part.map((group) => group.toString(16)).join(":");
  if (start === -1) return text(groups);
  return `${text(groups.slice(0, start))}::${text(groups.slice(start + length))}`;
}
