import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { isIP, type LookupFunction } from "node:net";
import { buildConnector } from "undici";

/** Which peers a connection may reach: a name let through whatever it resolves to, or an address. */
export interface ConnectionPolicy {
  allowsHost(host: string): boolean;
  allowsAddress(address: string): boolean;
}

/** A connection refused because its peer is at a private address the policy does not allow. */
export class PrivateAddressRefused extends Error {
  readonly code = "EPRIVATEADDRESS";
  readonly host: string;
  readonly address: string;

  constructor(host: string, address: string) {
    super(host === address ? `refused: ${address} is a private address` : `refused: ${host} resolves to ${address}, a private address`);
    this.host = host;
    this.address = address;
  }
}

/** Whether `error` (or its cause) is a PrivateAddressRefused. */
export function isPrivateAddressRefusal(error: unknown): error is PrivateAddressRefused {
  return error instanceof PrivateAddressRefused || (error as { cause?: unknown } | undefined)?.cause instanceof PrivateAddressRefused;
}

function bare(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

/**
 * The refusal of a host written as an IP address the policy does not allow (an address is never looked up, so the
 * lookup below does not see it); undefined for a name or an allowed address.
 */
export function literalRefusal(host: string, policy: ConnectionPolicy): PrivateAddressRefused | undefined {
  const address = bare(host);
  if (isIP(address) === 0 || policy.allowsHost(address) || policy.allowsAddress(address)) return undefined;
  return new PrivateAddressRefused(address, address);
}

/**
 * A lookup (node:net's `lookup` option) that resolves a name and refuses it when any of its addresses is one the
 * policy does not allow: the connection then goes to an address checked, so a name cannot resolve one way for a
 * check and another for the connection (DNS rebinding). `policy` is asked at each lookup.
 */
export function guardedLookup(policy: () => ConnectionPolicy): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, "", 0);
      const current = policy();
      const refused = current.allowsHost(hostname) ? undefined : addresses.find((entry) => !current.allowsAddress(entry.address));
      if (refused) return callback(new PrivateAddressRefused(hostname, refused.address), "", 0);
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      const first = addresses[0] as LookupAddress;
      callback(null, first.address, first.family);
    });
  };
}

/**
 * undici's `connect` option for an Agent whose connections obey `policy` (asked at each connection): a private
 * address written in the URL is refused before connecting, a name through guardedLookup, and the socket's peer is
 * checked once connected (undici's documented custom connector), before anything is written to it. `tls`: the TLS
 * settings of every connection (an upstream's CA, client certificate).
 */
export function guardedConnector(policy: () => ConnectionPolicy, tls: buildConnector.BuildOptions = {}): buildConnector.connector {
  const connect = buildConnector({ ...tls, lookup: guardedLookup(policy) });
  return (options, callback) => {
    const refused = literalRefusal(options.hostname, policy());
    if (refused) return callback(refused, null);
    connect(options, (error, socket) => {
      if (error !== null) return callback(error, null);
      const current = policy();
      const peer = socket.remoteAddress;
      if (peer !== undefined && !current.allowsHost(bare(options.hostname)) && !current.allowsAddress(peer)) {
        socket.destroy();
        return callback(new PrivateAddressRefused(bare(options.hostname), peer), null);
      }
      callback(null, socket);
    });
  };
}
