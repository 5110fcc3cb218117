import type { Operation } from "openapi-backend";
import { KeygateError, type ValidationIssue } from "../errors/keygate-error.js";
import { samePath } from "../http/request-target.js";
import { bodyTooLarge } from "./forwarding.js";
import type { AccessRequest, AccessRoute } from "./gateway-request.js";
import type { OpenApiDocument, RequestParts } from "./openapi-documents.js";
import { type BodyRead, hasBody, readBody } from "./request-body.js";

/** The largest request body an openapi policy reads to validate it; a larger one is refused (413). */
export const OPENAPI_BODY_LIMIT = 1024 * 1024;

/**
 * What an openapi policy makes of a request before its body is read: a refusal, or (for a JSON body the operation
 * describes) the body's check still to run, or nothing to object to.
 */
export type OpenApiStep = { refusal: KeygateError } | { body: () => Promise<KeygateError | undefined> } | undefined;

/** The parts of an operation's request body this policy reads. */
interface RequestBodyObject {
  required?: boolean;
  content?: Record<string, { schema?: unknown } | undefined>;
}

/**
 * Validates a request against its route's OpenAPI document: the method and the path (as the client sent it, escaped
 * unreserved characters decoded, as routes match it) select the operation; its path, query and header parameters are
 * validated now, and so is the body's media type; a JSON body the operation has a schema for is read (at most
 * OPENAPI_BODY_LIMIT bytes) and validated by the returned step's `body`, and is then forwarded from the buffer. At the
 * forward-auth door only the path, query and header parameters are.
 */
export function openApiStep(document: OpenApiDocument, route: Pick<AccessRoute, "keySources">, request: AccessRequest): OpenApiStep {
  const path = samePath(request.path);
  const matched = document.match(request.method, path);
  if (matched.kind === "refused") return { refusal: requestInvalid([matched.issue]) };
  const { operation } = matched;
  const raw = request.raw;
  const parts: RequestParts = {
    method: request.method,
    path,
    query: validatedQuery(route, operation, request.query),
    headers: raw.headers,
  };
  const issues = document.validate(operation, parts);
  // The forward-auth door reads no body, and the auth request's is not the original's (nginx sends none): the body,
  // its media type and whether there is one are left unchecked there.
  if (request.forwardAuth) return issues.length > 0 ? { refusal: requestInvalid(issues) } : undefined;
  const described = operation.requestBody as RequestBodyObject | undefined;
  // An upgrade's bytes after its head belong to the protocol it switches to: it has no body to validate.
  const withBody = hasBody(raw) && (raw as { upgrade?: boolean }).upgrade !== true;
  let readsBody = false;
  if (!withBody) {
    if (described?.required === true) issues.push({ location: "body", message: "is required" });
  } else if (described?.content !== undefined) {
    const declared = Object.keys(described.content);
    const mediaType = mediaTypeOf(raw.headers["content-type"]);
    const taken = mediaType === undefined ? undefined : takenMediaType(mediaType, declared);
    if (taken === undefined) {
      const expected = declared.join(" or ");
      issues.push({
        location: "header.content-type",
        message: mediaType === undefined ? `is required (${expected})` : `must be ${expected}`,
      });
    } else readsBody = taken === "application/json" && described.content[taken]?.schema !== undefined;
  }
  if (issues.length > 0) return { refusal: requestInvalid(issues) };
  if (!readsBody) return undefined;
  return { body: () => validateBody(document, operation, parts, request, described?.required === true) };
}

/** Reads the request's JSON body and validates it; the body is kept on the request, to be forwarded. */
async function validateBody(
  document: OpenApiDocument,
  operation: Operation,
  parts: RequestParts,
  request: AccessRequest,
  required: boolean,
): Promise<KeygateError | undefined> {
  const routeLimit = request.route?.bodyLimit;
  // Read already where the door parsed it before the policies ran (a Fastify route under the plugin).
  const read: BodyRead =
    request.body !== undefined
      ? { kind: "read", body: request.body }
      : await readBody(request.raw, routeLimit !== undefined && routeLimit < OPENAPI_BODY_LIMIT ? routeLimit : OPENAPI_BODY_LIMIT);
  if (read.kind === "gone") {
    return new KeygateError("err:user:bad_request:client_closed_request", "The client went away before its request body was read.");
  }
  if (read.kind === "too-large") {
    if (routeLimit !== undefined && routeLimit < OPENAPI_BODY_LIMIT) return bodyTooLarge(routeLimit);
    return new KeygateError(
      "err:user:bad_request:request_body_too_large",
      `The request body is larger than the ${OPENAPI_BODY_LIMIT} bytes the route's openapi policy reads to validate it.`,
    );
  }
  request.body = read.body;
  // A transfer coding that came to nothing: no body after all.
  if (read.body.length === 0) return required ? requestInvalid([{ location: "body", message: "is required" }]) : undefined;
  let body: unknown;
  try {
    body = JSON.parse(read.body.toString("utf8"));
  } catch (error) {
    return requestInvalid([{ location: "body", message: `is not valid JSON: ${(error as Error).message}` }]);
  }
  // Written out rather than spread: this runs for every JSON body an openapi policy validates
  // (docs/architecture.md#conventions).
  const issues = document.validate(operation, { method: parts.method, path: parts.path, query: parts.query, headers: parts.headers, body });
  return issues.length > 0 ? requestInvalid(issues) : undefined;
}

/** 400 request_invalid naming every problem found; the detail quotes the first. */
function requestInvalid(issues: ValidationIssue[]): KeygateError {
  const [first] = issues as [ValidationIssue, ...ValidationIssue[]];
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more; see errors)` : "";
  return new KeygateError(
    "err:keygate:gateway:request_invalid",
    `The request does not match the route's OpenAPI document: ${first.location} ${first.message}${more}.`,
    { errors: issues },
  );
}

/**
 * The query string the document judges: a key sent in a query parameter (a keyauth policy's location) is keygate's,
 * never forwarded, so it is left out unless the operation declares that parameter itself.
 */
function validatedQuery(route: Pick<AccessRoute, "keySources">, operation: Operation, query: string): string {
  if (query === "" || !route.keySources.some((source) => source.kind === "query")) return query;
  const declared = new Set<string>();
  for (const parameter of operation.parameters ?? []) {
    if ("in" in parameter && parameter.in === "query") declared.add(parameter.name);
  }
  const params = new URLSearchParams(query);
  for (const source of route.keySources) {
    if (source.kind === "query" && !declared.has(source.parameter)) params.delete(source.parameter);
  }
  return params.toString();
}

/** The media type of a Content-Type header, lower case, without its parameters. */
function mediaTypeOf(header: string | undefined): string | undefined {
  const type = header?.split(";")[0]?.trim().toLowerCase();
  return type === "" ? undefined : type;
}

/** The media type the operation declares that takes `mediaType`: the same, else `type/*`, else `*∕*`. */
function takenMediaType(mediaType: string, declared: readonly string[]): string | undefined {
  const lower = declared.map((each) => each.toLowerCase());
  const wildcard = `${mediaType.split("/")[0]}/*`;
  for (const candidate of [mediaType, wildcard, "*/*"]) {
    const index = lower.indexOf(candidate);
    if (index >= 0) return declared[index];
  }
  return undefined;
}
