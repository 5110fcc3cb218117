import type { IncomingHttpHeaders } from "node:http";
import type { CompiledRoute } from "./route-table.js";

/** What verification established about the caller, for the headers the upstream gets. */
export interface ForwardedIdentity {
  keyId: string;
  identityId?: string;
  externalId?: string;
}

/**
 * The upstream URL of a request in two parts: the route's upstream with the request path appended, and the query
 * string (without "?"; "" when there is none), without the key when the key came in a query parameter.
 */
export function upstreamTarget(route: CompiledRoute, requestUrl: string): { url: string; query: string } {
  const queryAt = requestUrl.indexOf("?");
  const path = queryAt === -1 ? requestUrl : requestUrl.slice(0, queryAt);
  let query = queryAt === -1 ? "" : requestUrl.slice(queryAt + 1);
  if (route.keySource.kind === "query" && query !== "") {
    const params = new URLSearchParams(query);
    params.delete(route.keySource.parameter);
    query = params.toString();
  }
  const base = route.upstream.pathname.replace(/\/+$/, "");
  return { url: `${route.upstream.origin}${base}${path}`, query };
}

/** The upstream URL of a request, query string included (see upstreamTarget). */
export function upstreamUrl(route: CompiledRoute, requestUrl: string): string {
  const { url, query } = upstreamTarget(route, requestUrl);
  return query ? `${url}?${query}` : url;
}

/**
 * The headers the upstream gets: the client's, without the key and without any header the route forwards itself
 * (a client cannot forge `x-keygate-key-id`), plus the identity headers and X-Forwarded-For/Proto/Host.
 */
export function upstreamHeaders(
  route: CompiledRoute,
  incoming: IncomingHttpHeaders,
  caller: ForwardedIdentity,
  client: { ip: string; protocol: string; host: string | undefined },
): IncomingHttpHeaders {
  const headers: IncomingHttpHeaders = { ...incoming };
  // Node's server has already answered `Expect: 100-continue` (and keygate refuses any other expectation); the
  // proxy client refuses to send the header at all.
  delete headers.expect;
  if (route.keySource.kind === "header") delete headers[route.keySource.header];
  const forward = route.config.forward ?? {};
  for (const header of Object.values(forward)) delete headers[header.toLowerCase()];
  if (forward.keyId) headers[forward.keyId.toLowerCase()] = caller.keyId;
  if (forward.identity && caller.identityId) headers[forward.identity.toLowerCase()] = caller.identityId;
  if (forward.externalId && caller.externalId) headers[forward.externalId.toLowerCase()] = caller.externalId;

  const priorForwardedFor = headers["x-forwarded-for"];
  headers["x-forwarded-for"] = priorForwardedFor ? `${Array.isArray(priorForwardedFor) ? priorForwardedFor.join(", ") : priorForwardedFor}, ${client.ip}` : client.ip;
  headers["x-forwarded-proto"] = client.protocol;
  if (client.host) headers["x-forwarded-host"] = client.host;
  return headers;
}
