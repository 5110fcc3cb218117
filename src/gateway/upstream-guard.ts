import { lookup } from "node:dns/promises";
import { isIP, type LookupFunction } from "node:net";
import type { Dispatcher } from "undici";
import type { UpstreamTls } from "../domain/routes/upstream-compiler.js";
import { guardedConnector, guardedLookup, literalRefusal, type PrivateAddressRefused } from "../http/guarded-connections.js";
import { PrivateAddressAllowance } from "../lib/private-addresses.js";
import { upstreamAgent } from "./upstream-client.js";

/** Where the operator lifts the guard, as its messages name it. */
export const ALLOWED_UPSTREAMS_SETTING = "gateway.apiRoutes.allowedUpstreams";

/**
 * Keeps routes made through the API out of the operator's network: their upstreams may not be at a loopback,
 * private, link-local, unspecified or reserved address, nor at a name resolving to one, unless the operator's list
 * (`gateway.apiRoutes.allowedUpstreams`, read at each use: a reload changes it) names the address, a range holding
 * it, or the name. Checked when a route is written (`refusal`) and again at every connection (`dispatcher` for plain
 * requests and health probes, `upgrade` for upgrades), so a name that resolves elsewhere later is refused too.
 * Routes of the configuration file are the operator's: they do not pass here.
 */
export class ApiUpstreamGuard {
  private readonly allowed: () => readonly string[];
  private compiled: { entries: readonly string[]; allowance: PrivateAddressAllowance } | undefined;

  /** `allowed`: the operator's list in force (its entries checked at load). */
  constructor(allowed: () => readonly string[]) {
    this.allowed = allowed;
  }

  /** The allowance of the list in force, compiled once per list. */
  allowance(): PrivateAddressAllowance {
    const entries = this.allowed();
    if (this.compiled?.entries !== entries) this.compiled = { entries, allowance: new PrivateAddressAllowance(entries) };
    return this.compiled.allowance;
  }

  /**
   * Why a route made through the API may not have `url` as an upstream (the address it is at, or resolves to);
   * undefined when it may. A name that does not resolve now is let through: the connection is checked anyway.
   */
  async refusal(url: URL): Promise<string | undefined> {
    const host = url.hostname.replace(/^\[|\]$/g, "");
    const allowance = this.allowance();
    if (allowance.allowsHost(host)) return undefined;
    let addresses: string[];
    if (isIP(host) !== 0) addresses = [host];
    else {
      try {
        addresses = (await lookup(host, { all: true })).map((entry) => entry.address);
      } catch {
        return undefined;
      }
    }
    const refused = addresses.find((address) => !allowance.allowsAddress(address));
    if (refused === undefined) return undefined;
    const where = refused === host ? `is at ${refused}` : `resolves to ${refused}`;
    return `'${url.host}' ${where}, a loopback, private, link-local or reserved address: a route made through the API may reach it only when ${ALLOWED_UPSTREAMS_SETTING} in the configuration file names it`;
  }

  /** A pool of connections for an API route's upstream (`tls`: its own TLS settings), every connection checked. */
  dispatcher(tls: UpstreamTls | undefined): Dispatcher {
    return upstreamAgent(guardedConnector(() => this.allowance(), tls ?? {}));
  }

  /** An upgrade's checks, for node:http: the refusal of an address in its URL, and the lookup of a name. */
  readonly upgrade: { refusal(host: string): PrivateAddressRefused | undefined; lookup: LookupFunction } = {
    refusal: (host) => literalRefusal(host, this.allowance()),
    lookup: guardedLookup(() => this.allowance()),
  };
}
