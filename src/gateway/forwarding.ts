import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import { rewritePath } from "../domain/routes/path-rewrite.js";
import { KeygateError } from "../errors/keygate-error.js";
import type { RequestTarget } from "../http/request-target.js";
import type { RouteForward } from "../storage/route-records.js";
import type { GatewayRequest } from "./gateway-request.js";
import { endToEndHeaders } from "./hop-by-hop.js";
import { addVia } from "./loop-detection.js";
import { principalHeader, type VerifiedKey } from "./principal.js";
import type { CompiledRoute, DecisionRoute } from "./route-table.js";

/**
 * The path and query a request is sent upstream with: the route's upstream path, then the request path (without the
 * route's prefix when it strips it, and rewritten when it rewrites it: see forwardRefusal), then the query string
 * minus the key when the key came in a query parameter. The path must have passed pathRefusal.
 */
export function upstreamPath(route: CompiledRoute, { path, query, forwardPath }: RequestTarget & { forwardPath?: string }): string {
  if (route.pathRewrite !== undefined) path = forwardPath ?? rewritePath(route.pathRewrite, path);
  if (query !== "" && route.keySources.some((source) => source.kind === "query")) {
    const params = new URLSearchParams(query);
    for (const source of route.keySources) if (source.kind === "query") params.delete(source.parameter);
    query = params.toString();
  }
  const full = `${route.upstreamBase}${path}`;
  return `${full === "" ? "/" : full}${query === "" ? "" : `?${query}`}`;
}

/**
 * Why a request cannot be forwarded on its route, found before its key is verified: a declared body larger than
 * the route's bodyLimit (413), or a path the route's rewrite turned into one with a dot segment (400). A rewritten
 * path is noted on the request for upstreamPath.
 */
export function forwardRefusal(route: DecisionRoute, request: GatewayRequest): KeygateError | undefined {
  const limit = route.bodyLimit;
  const declared = request.raw.headers["content-length"];
  if (limit !== undefined && declared !== undefined && Number(declared) > limit) return bodyTooLarge(limit);
  const rewrite = route.pathRewrite;
  if (rewrite === undefined) return undefined;
  const path = rewritePath(rewrite, request.path);
  if (pathRefusal(path) !== undefined) {
    const detail = `The route's rewrite makes the path '${path}', which keygate does not forward (a dot segment, or an escape that does not decode).`;
    return new KeygateError("err:keygate:gateway:invalid_path", detail);
  }
  request.forwardPath = path;
  return undefined;
}

/** The refusal of a body larger than a route's bodyLimit. */
export function bodyTooLarge(limit: number): KeygateError {
  return new KeygateError(
    "err:user:bad_request:request_body_too_large",
    `The request body is larger than this route's limit of ${limit} bytes.`,
  );
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
 * Sets the route's `forward` headers (lower-case names) for a verified key: its id, identity, external id and
 * principal; nothing without a key.
 */
export function addIdentityHeaders(
  headers: IncomingHttpHeaders | OutgoingHttpHeaders,
  forward: RouteForward,
  verification: VerifiedKey | undefined,
): void {
  const key = verification?.key;
  if (!key) return;
  if (forward.keyId) headers[forward.keyId.toLowerCase()] = key.keyId;
  if (forward.identity && key.identity) headers[forward.identity.toLowerCase()] = key.identity.id;
  if (forward.externalId && key.identity) headers[forward.externalId.toLowerCase()] = key.identity.externalId;
  if (forward.principal) headers[forward.principal.toLowerCase()] = principalHeader(verification);
}

/**
 * The headers the upstream gets: the client's end-to-end headers (hop-by-hop ones stop here), without the key and
 * without any header the route forwards itself (a client cannot forge `x-keygate-key-id`), plus the identity
 * headers (for a verified key), X-Forwarded-For/Proto/Host and keygate's Via entry (`client.via`). X-Forwarded-For gets the address keygate's connection came from
 * (`client.peer`, the socket's remote address; nothing when the socket is gone), as every proxy appends its peer.
 * `target`: the target of the route's upstream pool the request goes to (its first by default).
 */
export function upstreamHeaders(
  route: CompiledRoute,
  incoming: IncomingHttpHeaders,
  verification: VerifiedKey | undefined,
  client: { peer: string | undefined; protocol: string; host: string | undefined; via: string },
  target: URL = route.upstream,
): IncomingHttpHeaders {
  const headers = endToEndHeaders(incoming, "request");
  for (const source of route.keySources) if (source.kind === "header") delete headers[source.header];
  const forward = route.forward;
  for (const header of Object.values(forward)) delete headers[header.toLowerCase()];
  addIdentityHeaders(headers, forward, verification);

  const prior = headers["x-forwarded-for"];
  const entries = [Array.isArray(prior) ? prior.join(", ") : prior, client.peer].filter((entry) => entry !== undefined && entry !== "");
  if (entries.length > 0) headers["x-forwarded-for"] = entries.join(", ");
  headers["x-forwarded-proto"] = client.protocol;
  if (client.host) headers["x-forwarded-host"] = client.host;
  addVia(headers, client.via);
  // The upstream is addressed by its own name (virtual hosts, TLS names), the client's Host going as X-Forwarded-Host,
  // unless the route passes the client's on (`host: client`).
  headers.host = route.clientHost && client.host ? client.host : target.host;
  return headers;
}
