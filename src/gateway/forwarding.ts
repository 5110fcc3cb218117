import type { IncomingHttpHeaders } from "node:http";
import { endToEndHeaders } from "./hop-by-hop.js";
import type { CompiledRoute } from "./route-table.js";

/** What verification established about the caller, for the headers the upstream gets. */
export interface ForwardedIdentity {
  keyId: string;
  identityId?: string;
  externalId?: string;
}

/**
 * The upstream URL of a request: the route's upstream with the request path appended, and the query string
 * without the key when the key came in a query parameter.
 */
export function upstreamUrl(route: CompiledRoute, requestUrl: string): string {
  const queryAt = requestUrl.indexOf("?");
  const path = queryAt === -1 ? requestUrl : requestUrl.slice(0, queryAt);
  let query = queryAt === -1 ? "" : requestUrl.slice(queryAt + 1);
  if (route.keySource.kind === "query" && query !== "") {
    const params = new URLSearchParams(query);
    params.delete(route.keySource.parameter);
    query = params.toString();
  }
  const base = route.upstream.pathname.replace(/\/+$/, "");
  return `${route.upstream.origin}${base}${path}${query ? `?${query}` : ""}`;
}

/**
 * The headers the upstream gets: the client's end-to-end headers (hop-by-hop ones stop here), without the key and
 * without any header the route forwards itself (a client cannot forge `x-keygate-key-id`), plus the identity
 * headers and X-Forwarded-For/Proto/Host. X-Forwarded-For gets the address keygate's connection came from
 * (`client.peer`, the socket's remote address; nothing when the socket is gone), as every proxy appends its peer.
 */
export function upstreamHeaders(
  route: CompiledRoute,
  incoming: IncomingHttpHeaders,
  caller: ForwardedIdentity,
  client: { peer: string | undefined; protocol: string; host: string | undefined },
): IncomingHttpHeaders {
  const headers = endToEndHeaders(incoming, "request");
  if (route.keySource.kind === "header") delete headers[route.keySource.header];
  const forward = route.config.forward ?? {};
  for (const header of Object.values(forward)) delete headers[header.toLowerCase()];
  if (forward.keyId) headers[forward.keyId.toLowerCase()] = caller.keyId;
  if (forward.identity && caller.identityId) headers[forward.identity.toLowerCase()] = caller.identityId;
  if (forward.externalId && caller.externalId) headers[forward.externalId.toLowerCase()] = caller.externalId;

  const prior = headers["x-forwarded-for"];
  const entries = [Array.isArray(prior) ? prior.join(", ") : prior, client.peer].filter((entry) => entry !== undefined && entry !== "");
  if (entries.length > 0) headers["x-forwarded-for"] = entries.join(", ");
  headers["x-forwarded-proto"] = client.protocol;
  if (client.host) headers["x-forwarded-host"] = client.host;
  return headers;
}
