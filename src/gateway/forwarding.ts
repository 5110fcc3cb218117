import type { IncomingHttpHeaders } from "node:http";
import type { RequestTarget } from "../http/request-target.js";
import { endToEndHeaders } from "./hop-by-hop.js";
import { principalHeader, type VerifiedKey } from "./principal.js";
import type { CompiledRoute } from "./route-table.js";

/**
 * The path and query a request is sent upstream with: the route's upstream path, then the request path, then the
 * query string minus the key when the key came in a query parameter. The path must have passed pathRefusal.
 */
export function upstreamPath(route: CompiledRoute, { path, query }: RequestTarget): string {
  if (query !== "" && route.keySources.some((source) => source.kind === "query")) {
    const params = new URLSearchParams(query);
    for (const source of route.keySources) if (source.kind === "query") params.delete(source.parameter);
    query = params.toString();
  }
  return `${route.upstreamBase}${path}${query === "" ? "" : `?${query}`}`;
}

/** The upstream URL of a request, query string included. */
export function upstreamUrl(route: CompiledRoute, target: RequestTarget): string {
  return route.upstream.origin + upstreamPath(route, target);
}

/** Why a request path is not forwarded: see pathRefusal. */
export type PathProblem = "undecodable" | "dot segment";

/**
 * Why a request path is not forwarded, or undefined when it may be. Refused: a path that does not decode (percent
 * escapes of valid UTF-8), and one with a dot segment once decoded, '/' and '\' both taken as separators: a
 * segment that is '.', or begins or ends with '..' ('..', '...', '..;' and the like). URL parsers resolve such segments, and servers upstream may, against the path as
 * given: they could take the request out of the route's upstream path, so that it reaches what another route
 * guards, after this route's checks. Decoded once, as a strict proxy does. Encoded slashes and backslashes on
 * their own, and dots inside a segment, are forwarded as they are.
 */
export function pathRefusal(path: string): PathProblem | undefined {
  if (!/[.%\\]/.test(path)) return undefined;
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    return "undecodable";
  }
  for (const segment of decoded.split(/[\\/]/)) {
    if (segment === "." || segment.startsWith("..") || segment.endsWith("..")) return "dot segment";
  }
  return undefined;
}

/**
 * The headers the upstream gets: the client's end-to-end headers (hop-by-hop ones stop here), without the key and
 * without any header the route forwards itself (a client cannot forge `x-keygate-key-id`), plus the identity
 * headers (for a verified key) and X-Forwarded-For/Proto/Host. X-Forwarded-For gets the address keygate's connection came from
 * (`client.peer`, the socket's remote address; nothing when the socket is gone), as every proxy appends its peer.
 * `target`: the target of the route's upstream pool the request goes to (its first by default).
 */
export function upstreamHeaders(
  route: CompiledRoute,
  incoming: IncomingHttpHeaders,
  verification: VerifiedKey | undefined,
  client: { peer: string | undefined; protocol: string; host: string | undefined },
  target: URL = route.upstream,
): IncomingHttpHeaders {
  const headers = endToEndHeaders(incoming, "request");
  for (const source of route.keySources) if (source.kind === "header") delete headers[source.header];
  const forward = route.forward;
  for (const header of Object.values(forward)) delete headers[header.toLowerCase()];
  const key = verification?.key;
  if (key) {
    if (forward.keyId) headers[forward.keyId.toLowerCase()] = key.keyId;
    if (forward.identity && key.identity) headers[forward.identity.toLowerCase()] = key.identity.id;
    if (forward.externalId && key.identity) headers[forward.externalId.toLowerCase()] = key.identity.externalId;
    if (forward.principal) headers[forward.principal.toLowerCase()] = principalHeader(verification);
  }

  const prior = headers["x-forwarded-for"];
  const entries = [Array.isArray(prior) ? prior.join(", ") : prior, client.peer].filter((entry) => entry !== undefined && entry !== "");
  if (entries.length > 0) headers["x-forwarded-for"] = entries.join(", ");
  headers["x-forwarded-proto"] = client.protocol;
  if (client.host) headers["x-forwarded-host"] = client.host;
  // The upstream is addressed by its own name (virtual hosts, TLS names); the client's Host goes as X-Forwarded-Host.
  headers.host = target.host;
  return headers;
}
