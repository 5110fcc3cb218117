import type { IncomingMessage } from "node:http";
import proxyaddr from "@fastify/proxy-addr";

/**
 * `gateway.trustProxy`: which hops in front of keygate may report the client in X-Forwarded-For. `false` trusts
 * none; `true` every one (so any client can choose its address); a number trusts that many hops nearest keygate,
 * whoever they are; addresses, CIDR ranges or the names `loopback`, `linklocal`, `uniquelocal` (a list, or one
 * comma-separated string) trust the hops at those addresses.
 */
export type TrustProxySetting = boolean | number | string | readonly string[];

/**
 * Whether the address at `hop` is a proxy keygate trusts: hop 0 is the connection's peer, hop 1 the last
 * X-Forwarded-For entry (written by the peer), and so on towards the client.
 */
export type ProxyTrust = (address: string, hop: number) => boolean;

const NAMED_RANGES = ["loopback", "linklocal", "uniquelocal"];

/** Logged (warn) whenever `trustProxy: true` comes into force: at start-up and on a reload. */
export const TRUST_EVERY_HOP_WARNING =
  "gateway.trustProxy is true: every X-Forwarded-For hop is trusted, so any client can choose the address keygate counts it under (identifier `ip`); name your proxies' addresses or their number instead";

/** The addresses of a list setting, as written (a string is a comma-separated list). */
function listedAddresses(setting: string | readonly string[]): string[] {
  return typeof setting === "string" ? setting.split(",").map((entry) => entry.trim()) : [...setting];
}

/** What is wrong with a setting, each problem naming its path under `gateway.trustProxy`; empty when it is valid. */
export function trustProxyProblems(setting: TrustProxySetting): string[] {
  if (typeof setting === "boolean" || typeof setting === "number") return [];
  const problems: string[] = [];
  listedAddresses(setting).forEach((entry, index) => {
    try {
      proxyaddr.compile(entry);
    } catch {
      const at = typeof setting === "string" ? "gateway.trustProxy" : `gateway.trustProxy[${index}]`;
      problems.push(`${at}: '${entry}' is not an IP address, a CIDR range (10.0.0.0/8) or one of ${NAMED_RANGES.join(", ")}`);
    }
  });
  return problems;
}

/** Compiles a setting that passed trustProxyProblems (throws otherwise). */
export function compileTrust(setting: TrustProxySetting): ProxyTrust {
  if (setting === true) return () => true;
  if (setting === false) return () => false;
  if (typeof setting === "number") return (_address, hop) => hop < setting;
  const problems = trustProxyProblems(setting);
  if (problems.length > 0) throw new Error(problems.join("; "));
  return proxyaddr.compile(listedAddresses(setting));
}

/**
 * The client's address: walking from the connection's peer back through X-Forwarded-For, the first address that
 * is not a trusted proxy (or the farthest one, when all are trusted). `peer` is the socket's remote address;
 * "unknown" when the socket is already gone.
 */
export function clientAddress(peer: string | undefined, forwardedFor: string | string[] | undefined, trust: ProxyTrust): string {
  if (forwardedFor === undefined || peer === undefined) return peer ?? "unknown";
  // proxy-addr reads only these two fields of a request.
  const request = {
    headers: { "x-forwarded-for": Array.isArray(forwardedFor) ? forwardedFor.join(", ") : forwardedFor },
    socket: { remoteAddress: peer },
  };
  return proxyaddr(request as unknown as IncomingMessage, trust) ?? peer;
}
