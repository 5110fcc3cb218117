import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import { KeygateError } from "../errors/keygate-error.js";
import { type RequestTarget, splitTarget } from "../http/request-target.js";
import type { Allowed } from "./decision.js";
import { addIdentityHeaders } from "./forwarding.js";
import type { DecisionRoute } from "./route-table.js";

/**
 * The request a proxy asks the forward-auth door about, as its headers describe it: the method and target (path and
 * query as the client sent them), and the host when a header names it.
 */
export interface OriginalRequest extends RequestTarget {
  method: string;
  /** The target as sent: path and query. */
  url: string;
  host: string | undefined;
}

/** A request to the forward-auth door: `appended` is the original target after the door's path (Envoy's form). */
export interface DoorRequest {
  appended?: string;
}

const AT_THE_DOOR: DoorRequest = {};

/**
 * Whether a request is the forward-auth door's (`door`: `gateway.forwardAuth`): its path is the door's, or one below
 * it, where Envoy's ext_authz (its `path_prefix`) appends the original target, the rest of `url`. A path that only
 * begins like the door's (`/_keygate/authz`) is not. undefined: not the door's.
 */
export function doorRequest(door: { enabled: boolean; path: string }, path: string, url: string): DoorRequest | undefined {
  if (!door.enabled || !path.startsWith(door.path)) return undefined;
  const length = door.path.length;
  if (path.length === length) return AT_THE_DOOR;
  return path.charCodeAt(length) === SLASH ? { appended: url.slice(length) } : undefined;
}

const SLASH = 0x2f;

/**
 * The headers that name the original target, by proxy: nginx's convention (`auth_request` with
 * `proxy_set_header X-Original-URI $request_uri`), ingress-nginx's (`X-Original-URL`, an absolute URL), and
 * Traefik's, Caddy's and Envoy's (`X-Forwarded-Uri`).
 */
const TARGET_HEADERS = ["x-original-uri", "x-original-url", "x-forwarded-uri"] as const;
const METHOD_HEADERS = ["x-original-method", "x-forwarded-method"] as const;

/**
 * Reads the original request from a forward-auth request's headers, or from `appended`, the target after the door's
 * path (Envoy); `doorMethod` (the auth request's own) stands in for a method no header names (nginx's auth_request
 * and Envoy keep the client's). Every header present (and `appended`) must name the same
 * target (and method): a proxy sets its own and passes the client's others on, so a client that adds another
 * convention's header cannot make keygate decide a different request than the one the proxy forwards.
 */
export function originalRequest(headers: IncomingHttpHeaders, doorMethod: string, appended?: string): OriginalRequest | KeygateError {
  // Envoy's ext_authz in HTTP mode appends the original target to the door's path (its `path_prefix`).
  let url = appended;
  let named = appended === undefined ? undefined : "door's path";
  let host = single(headers["x-forwarded-host"]);
  for (const name of TARGET_HEADERS) {
    const value = single(headers[name]);
    if (value === undefined) continue;
    const absolute = name === "x-original-url" ? ABSOLUTE_URL.exec(value) : undefined;
    const target = absolute === undefined ? value : absolute && `/${(absolute[2] ?? "").replace(/^\//, "")}`;
    if (target === null || !target.startsWith("/")) {
      return unknownOriginal(
        `The ${name} header '${value}' is not a request target (${absolute === undefined ? "a path, starting with /" : "an absolute URL"}).`,
      );
    }
    if (absolute) host ??= absolute[1];
    if (url !== undefined && target !== url) return unknownOriginal(`The ${named} and the ${name} header name different requests.`);
    url = target;
    named = name;
  }
  if (url === undefined) {
    return unknownOriginal(
      "The forward-auth request does not say which request it asks about: send X-Original-URI (nginx) or X-Forwarded-Uri (Traefik, Caddy), or append it to the door's path (Envoy).",
    );
  }
  let method: string | undefined;
  for (const name of METHOD_HEADERS) {
    const value = single(headers[name])?.toUpperCase();
    if (value === undefined) continue;
    if (method !== undefined && value !== method) return unknownOriginal("The X-Original-Method and X-Forwarded-Method headers differ.");
    method = value;
  }
  const { path, query } = splitTarget(url);
  return { method: method ?? doorMethod, url, path, query, host };
}

/**
 * The head of the door's 200: the route's `forward` headers for the verified key (the proxy copies them into the
 * request it forwards) and the RateLimit headers. Every `forward` header the route names is in the answer, empty when
 * the key has none of it (no identity), so that a proxy replacing the client's copy never keeps a forged one.
 */
export function allowedHeaders(route: DecisionRoute, decision: Allowed, requestId: string): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = { "x-request-id": requestId, "content-length": "0", "cache-control": "no-store" };
  const forward = route.forward;
  for (const header of Object.values(forward)) headers[header.toLowerCase()] = "";
  addIdentityHeaders(headers, forward, decision.verification);
  const limits = decision.ratelimitHeaders;
  for (const name in limits) headers[name] = limits[name];
  return headers;
}

function unknownOriginal(detail: string): KeygateError {
  return new KeygateError("err:keygate:gateway:original_request_unknown", detail);
}

/**
 * An absolute URL (ingress-nginx's X-Original-URL): its authority, then its target as sent. Not parsed by URL, which
 * would resolve dot segments that the target as forwarded still has (the door refuses them as the gateway does).
 */
const ABSOLUTE_URL = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)(.*)$/i;

/** One header's value; a header sent twice (joined by Node, or an array) is taken as it came, never half of it. */
function single(value: string | string[] | undefined): string | undefined {
  if (value === undefined || value === "") return undefined;
  return Array.isArray(value) ? value.join(", ") : value;
}
