import { BAD_REQUEST, TOO_MANY } from "./titles.js";

/** The gateway's answers to requests for an upstream API (the /v2 API never sends these); part of ERROR_CATALOGUE. */
export const GATEWAY_ERRORS = {
  "err:keygate:gateway:invalid_path": {
    status: 400,
    title: BAD_REQUEST,
    meaning: "The request path has a dot segment ('.' or '..', also percent-encoded or between backslashes); it is not forwarded.",
  },
  "err:keygate:gateway:request_invalid": {
    status: 400,
    title: BAD_REQUEST,
    meaning:
      "The request does not match the route's OpenAPI document (an openapi policy): `errors[]` names each failing place (`path.id`, `query.limit`, `header.x-tenant`, `body.items[0].name`).",
  },
  "err:keygate:gateway:original_request_unknown": {
    status: 400,
    title: BAD_REQUEST,
    meaning:
      "A request to the forward-auth door does not say which request it asks about (X-Original-URI, X-Original-URL or X-Forwarded-Uri), or its headers name two different ones; the proxy's configuration is to blame.",
  },
  "err:keygate:gateway:missing_key": {
    status: 401,
    title: "Unauthorized",
    meaning: "The request carries no API key where the route expects one; WWW-Authenticate says where.",
  },
  "err:keygate:gateway:invalid_key": {
    status: 401,
    title: "Unauthorized",
    meaning: "The API key is unknown, deleted, or belongs to another API.",
  },
  "err:keygate:gateway:ip_not_allowed": {
    status: 403,
    title: "Forbidden",
    meaning: "The client's address is outside the IP allowlist of the route's API.",
  },
  "err:keygate:gateway:request_denied": {
    status: 403,
    title: "Forbidden",
    meaning:
      "A firewall policy of the route denies the request (its path, method, headers or client address), or its cors policy does not allow the origin of a preflight.",
  },
  "err:keygate:gateway:key_disabled": { status: 401, title: "Unauthorized", meaning: "The API key is disabled." },
  "err:keygate:gateway:key_expired": { status: 401, title: "Unauthorized", meaning: "The API key has expired." },
  "err:keygate:gateway:insufficient_permissions": {
    status: 403,
    title: "Forbidden",
    meaning: "The API key lacks the permissions the route's permission query needs.",
  },
  "err:keygate:gateway:no_route": {
    status: 404,
    title: "Not Found",
    meaning: "No route takes the path of the request the forward-auth door is asked about: it is refused, never let through.",
  },
  "err:keygate:gateway:rate_limited": {
    status: 429,
    title: TOO_MANY,
    meaning: "A rate limit of the key or of the route is exhausted; Retry-After and the RateLimit headers say which and until when.",
  },
  "err:keygate:gateway:usage_exceeded": {
    status: 429,
    title: TOO_MANY,
    meaning: "The key has no credits left for this request; Retry-After says when they refill, when they do.",
  },
  "err:keygate:gateway:upstream_unreachable": {
    status: 502,
    title: "Bad Gateway",
    meaning: "The route's upstream refused the connection, reset it or answered with something that is not HTTP.",
  },
  "err:keygate:gateway:upstream_timeout": {
    status: 504,
    title: "Gateway Timeout",
    meaning: "The route's upstream did not answer within the upstream timeout.",
  },
  "err:keygate:gateway:no_healthy_upstream": {
    status: 503,
    title: "Service Unavailable",
    meaning: "Every target of the route's upstream pool is ejected by its passive health checks or down by its active ones.",
  },
  "err:keygate:gateway:loop_detected": {
    status: 508,
    title: "Loop Detected",
    meaning:
      "The request came through this keygate already (its Via header names keygate's pseudonym: a route's upstream leads back to it), or through more proxies than gateway.via.maxHops; refused before any check or charge.",
  },
} as const;
