import { GATEWAY_ERRORS } from "./gateway-errors.js";
import { BAD_REQUEST, CONFLICT, INTERNAL, NOT_FOUND, PRECONDITION, TOO_MANY, UNPROCESSABLE } from "./titles.js";

/**
 * Every error keygate can answer with: code → HTTP status, title and a one-line meaning.
 * Nothing else in the code invents a status or a title. Codes follow Unkey's `err:{system}:{category}:{specific}`
 * so clients written for the hosted service keep working; `docs/errors.md` lists the same rows (a test checks it).
 * Statuses differ from the hosted service's only where docs/decisions.md says so (authentication failures are 401).
 */
export interface CatalogueEntry {
  readonly status: number;
  readonly title: string;
  readonly meaning: string;
}

export const ERROR_CATALOGUE = {
  // 400: the request itself is wrong
  "err:unkey:application:invalid_input": {
    status: 400,
    title: BAD_REQUEST,
    meaning: "The body failed validation; `errors[]` names each problem by location.",
  },
  "err:user:bad_request:request_body_unreadable": {
    status: 400,
    title: BAD_REQUEST,
    meaning: "The body is not valid JSON, or is empty where JSON is required.",
  },
  "err:user:bad_request:missing_required_header": { status: 400, title: BAD_REQUEST, meaning: "A header the operation needs is missing." },
  "err:user:bad_request:permissions_query_syntax_error": {
    status: 400,
    title: BAD_REQUEST,
    meaning: "The permission query does not parse; the detail gives the position.",
  },
  "err:user:bad_request:invalid_analytics_query": {
    status: 400,
    title: BAD_REQUEST,
    meaning: "The analytics SQL does not parse or refers to something unknown.",
  },
  "err:user:bad_request:invalid_analytics_table": {
    status: 400,
    title: BAD_REQUEST,
    meaning: "The analytics SQL reads a table that is not one of the public tables.",
  },
  "err:user:bad_request:invalid_analytics_function": {
    status: 400,
    title: BAD_REQUEST,
    meaning: "The analytics SQL calls a function that is not allowed.",
  },
  "err:user:bad_request:invalid_analytics_query_type": {
    status: 400,
    title: BAD_REQUEST,
    meaning: "The analytics SQL is not a single SELECT.",
  },
  "err:user:bad_request:query_range_exceeds_retention": {
    status: 400,
    title: BAD_REQUEST,
    meaning: "The analytics SQL asks for data older than the retention period.",
  },
  "err:user:bad_request:malformed_request": {
    status: 400,
    title: BAD_REQUEST,
    meaning: "The request is not valid HTTP/1.1 (request line, header syntax or framing), so it cannot be read; the connection is closed.",
  },
  "err:user:bad_request:malformed_url": {
    status: 400,
    title: BAD_REQUEST,
    meaning: "The request URL cannot be decoded (e.g. a '%' not followed by two hex digits).",
  },

  // 401: who is calling is not established (all of these are 401: docs/decisions.md#root-keys)
  "err:unkey:authentication:missing": { status: 401, title: "Unauthorized", meaning: "No Authorization header was sent." },
  "err:unkey:authentication:malformed": {
    status: 401,
    title: "Unauthorized",
    meaning: "The Authorization header is not `Bearer <root key>`.",
  },
  "err:unkey:authentication:key_not_found": {
    status: 401,
    title: "Unauthorized",
    meaning: "The root key is unknown, revoked, disabled or expired.",
  },
  "err:keygate:authentication:session_invalid": {
    status: 401,
    title: "Unauthorized",
    meaning: "The dashboard session is unknown, timed out or signed out, or its root key is no longer valid.",
  },
  "err:unkey:authentication:portal_token_missing": {
    status: 401,
    title: "Unauthorized",
    meaning: "A portal procedure was called without a portal session (the `portal_session` cookie).",
  },
  "err:unkey:authentication:portal_session_not_found": {
    status: 401,
    title: "Unauthorized",
    meaning: "The portal session or exchange code is unknown, expired, already redeemed or revoked.",
  },

  // 403: the caller is known but may not do this
  "err:unkey:authorization:insufficient_permissions": {
    status: 403,
    title: "Insufficient Permissions",
    meaning: "The root key lacks a permission the operation needs; the detail names it.",
  },
  "err:keygate:authorization:csrf_token_invalid": {
    status: 403,
    title: "Forbidden",
    meaning: "A request made with a dashboard or portal session lacks the session's CSRF token in `x-keygate-csrf-token`.",
  },

  // 404: the resource does not exist in the caller's workspace (another workspace's resources are 404 too)
  "err:user:bad_request:route_not_found": { status: 404, title: NOT_FOUND, meaning: "No operation is served at this path." },
  "err:unkey:data:key_not_found": { status: 404, title: NOT_FOUND, meaning: "The key does not exist or was deleted." },
  "err:unkey:data:api_not_found": { status: 404, title: NOT_FOUND, meaning: "The API does not exist or was deleted." },
  "err:unkey:data:key_space_not_found": { status: 404, title: NOT_FOUND, meaning: "The key space does not exist." },
  "err:unkey:data:permission_not_found": { status: 404, title: NOT_FOUND, meaning: "The permission does not exist." },
  "err:unkey:data:role_not_found": { status: 404, title: NOT_FOUND, meaning: "The role does not exist." },
  "err:unkey:data:identity_not_found": { status: 404, title: NOT_FOUND, meaning: "The identity does not exist." },
  "err:unkey:data:ratelimit_namespace_not_found": { status: 404, title: NOT_FOUND, meaning: "The rate limit namespace does not exist." },
  "err:unkey:data:ratelimit_override_not_found": { status: 404, title: NOT_FOUND, meaning: "The rate limit override does not exist." },
  "err:unkey:data:migration_not_found": {
    status: 404,
    title: NOT_FOUND,
    meaning: "No migration with this id is configured for the workspace.",
  },
  "err:keygate:data:root_key_not_found": { status: 404, title: NOT_FOUND, meaning: "The root key does not exist or was revoked." },
  "err:keygate:data:route_not_found": {
    status: 404,
    title: NOT_FOUND,
    meaning: "The gateway route does not exist, or not for this workspace.",
  },
  "err:keygate:data:webhook_not_found": {
    status: 404,
    title: NOT_FOUND,
    meaning: "The webhook endpoint does not exist, or not for this workspace.",
  },
  "err:unkey:data:portal_not_found": { status: 404, title: NOT_FOUND, meaning: "The portal does not exist, or the caller may not see it." },
  "err:keygate:data:policy_not_found": { status: 404, title: NOT_FOUND, meaning: "The route has no policy with this id." },

  // 405, 408, 409, 410
  "err:user:bad_request:method_not_allowed": {
    status: 405,
    title: "Method Not Allowed",
    meaning: "The path exists but not for this HTTP method; see the Allow header.",
  },
  "err:user:bad_request:request_timeout": {
    status: 408,
    title: "Request Timeout",
    meaning: "The request took too long to arrive or to answer.",
  },
  "err:unkey:data:identity_already_exists": { status: 409, title: CONFLICT, meaning: "An identity with this externalId already exists." },
  "err:unkey:data:role_already_exists": { status: 409, title: CONFLICT, meaning: "A role with this name already exists." },
  "err:unkey:data:permission_already_exists": { status: 409, title: CONFLICT, meaning: "A permission with this slug already exists." },
  "err:keygate:data:route_conflict": {
    status: 409,
    title: CONFLICT,
    meaning: "Another route has this name, or already takes this prefix for these methods.",
  },
  "err:keygate:data:portal_conflict": {
    status: 409,
    title: CONFLICT,
    meaning: "Another portal has this slug, or already serves this mapping.",
  },
  "err:keygate:data:route_owned_by_config": {
    status: 409,
    title: CONFLICT,
    meaning: "The route comes from the configuration file: change it there, not through the API.",
  },
  "err:unkey:data:ratelimit_namespace_gone": { status: 410, title: "Resource Gone", meaning: "The rate limit namespace was deleted." },

  // 412, 413, 415
  "err:unkey:application:protected_resource": {
    status: 412,
    title: "Resource is protected",
    meaning: "The resource has delete protection.",
  },
  "err:unkey:application:precondition_failed": {
    status: 412,
    title: PRECONDITION,
    meaning: "The operation needs something that is not set up (e.g. a vault key, a named rate limit).",
  },
  "err:unkey:data:analytics_not_configured": { status: 412, title: PRECONDITION, meaning: "Analytics is turned off on this keygate." },
  "err:user:bad_request:request_body_too_large": {
    status: 413,
    title: "Request Entity Too Large",
    meaning:
      "The body is larger than server.bodyLimit, than a gateway route's bodyLimit, or than the 1 MiB a gateway route's openapi policy reads to validate it.",
  },
  "err:user:bad_request:unsupported_media_type": {
    status: 415,
    title: "Unsupported Media Type",
    meaning: "The body is not sent as application/json.",
  },
  "err:user:bad_request:expectation_failed": {
    status: 417,
    title: "Expectation Failed",
    meaning: "The request has an Expect header other than 100-continue.",
  },

  // 422, 429, 431, 499
  "err:user:unprocessable_entity:query_execution_timeout": {
    status: 422,
    title: UNPROCESSABLE,
    meaning: "The analytics query ran longer than allowed.",
  },
  "err:user:unprocessable_entity:query_memory_limit_exceeded": {
    status: 422,
    title: UNPROCESSABLE,
    meaning: "The analytics query needed more memory than allowed.",
  },
  "err:user:unprocessable_entity:query_rows_limit_exceeded": {
    status: 422,
    title: UNPROCESSABLE,
    meaning: "The analytics query read or returned more rows than allowed.",
  },
  "err:user:too_many_requests:query_quota_exceeded": {
    status: 429,
    title: TOO_MANY,
    meaning: "The workspace used up its analytics query quota for now.",
  },
  "err:user:bad_request:request_header_fields_too_large": {
    status: 431,
    title: "Request Header Fields Too Large",
    meaning:
      "The request line and headers together are larger than Node's limit (16 KB unless `--max-http-header-size` says otherwise); the connection is closed.",
  },
  "err:user:bad_request:client_closed_request": {
    status: 499,
    title: "Client Closed Request",
    meaning: "The client went away before its request was read or answered; logged at info, since it is no fault of keygate.",
  },

  ...GATEWAY_ERRORS,

  // 5xx: our side
  "err:unkey:application:unexpected_error": {
    status: 500,
    title: INTERNAL,
    meaning: "Something failed inside keygate; the cause is in the server log under the request id.",
  },
  "err:unkey:application:service_unavailable": { status: 500, title: INTERNAL, meaning: "A backing service did not answer." },
  "err:keygate:data:audit_log_unavailable": {
    status: 503,
    title: "Service Unavailable",
    meaning:
      "The audit log cannot take this write's entry now. Either nothing was changed (its buffer is full and the engine does not take writes), or, as the detail then says, the write was made but its entry is not durable yet (keygate keeps it and tries again): read the resource back before retrying.",
  },
  "err:unkey:data:analytics_connection_failed": {
    status: 503,
    title: "Service Unavailable",
    meaning: "The analytics engine cannot be reached.",
  },
  "err:unkey:data:credits_unavailable": {
    status: 503,
    title: "Service Unavailable",
    meaning:
      "Credit balances cannot be reached (Redis does not answer) and `ratelimit.fail` is `closed` or `local`, so a request that spends credits is refused; Retry-After says when to try again.",
  },
  "err:keygate:server:shutting_down": {
    status: 503,
    title: "Service Unavailable",
    meaning: "keygate is closing and takes no new requests; send the request again, to another instance if there is one.",
  },
  "err:unkey:data:ratelimit_unavailable": {
    status: 503,
    title: "Service Unavailable",
    meaning:
      "Rate limit counters cannot be reached and `ratelimit.fail` is `closed`, so the check is refused; Retry-After says when to try again.",
  },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

export const DEFAULT_DOCS_URL = "https://unkey.com/docs/errors";

/** Where keygate serves a page for each code, `{path}/{system}/{category}/{specific}` (routes/error-pages.ts). */
export const KEYGATE_ERRORS_PATH = "/v2/errors";

/**
 * `err:unkey:data:api_not_found` → `{docsUrl}/unkey/data/api_not_found`, as the hosted service builds it. Unkey's
 * documentation has no page for keygate's own codes: under its URL (the default), an `err:keygate:*` code names
 * keygate's page of it instead, `/v2/errors/keygate/…`, relative to the server that answered.
 */
export function errorTypeUrl(code: ErrorCode, docsUrl: string): string {
  const path = code.split(":").slice(1).join("/");
  return docsUrl === DEFAULT_DOCS_URL && code.startsWith("err:keygate:") ? `${KEYGATE_ERRORS_PATH}/${path}` : `${docsUrl}/${path}`;
}
