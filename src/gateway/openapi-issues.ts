import type { ErrorObject } from "ajv";
import type { ValidationIssue } from "../errors/keygate-error.js";

// How a request that fails its route's OpenAPI document is told why: each Ajv error as a field and plain words.

/** An error about the request body, which openapi-backend reports when the body was not given (not read). */
export function aboutBody(error: ErrorObject): boolean {
  if (error.instancePath === "") return (error.params as { missingProperty?: string }).missingProperty === "requestBody";
  return error.instancePath === "/requestBody" || error.instancePath.startsWith("/requestBody/");
}

/** Where each part of a request is named in an issue's location. */
const PLACES: Record<string, string> = { requestBody: "body", path: "path", query: "query", header: "header", cookie: "cookie" };

/** An Ajv error of openapi-backend's validators as an issue: the failing place (`query.limit`, `body.items[0].name`), in plain words. */
export function issueOf(error: ErrorObject): ValidationIssue {
  const segments = error.instancePath
    .split("/")
    .slice(1)
    .map((segment) => segment.replace(/~1/g, "/").replace(/~0/g, "~"));
  const params = error.params as Record<string, unknown>;
  let message = error.message ?? "is not valid";
  switch (error.keyword) {
    case "required":
      segments.push(String(params.missingProperty));
      message = "is required";
      break;
    case "additionalProperties":
      segments.push(String(params.additionalProperty));
      message = segments[0] === "query" ? "is not a parameter of this operation" : "is not allowed";
      break;
    case "type": {
      const types = Array.isArray(params.type) ? params.type.map(String) : String(params.type).split(",");
      message = `must be ${types.map(withArticle).join(" or ")}`;
      break;
    }
    case "enum":
      message = `must be one of ${(params.allowedValues as unknown[]).map((value) => JSON.stringify(value)).join(", ")}`;
      break;
    case "parse":
      message = `is not valid JSON: ${error.message ?? ""}`;
      break;
  }
  return { location: locationOf(segments), message };
}

function withArticle(type: string): string {
  if (type === "null") return "null";
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

/** `body.items[0].name`; a name that is not a plain word is quoted (`body["a.b"]`). */
export function locationOf(segments: readonly string[]): string {
  const [first, ...rest] = segments;
  let location = first === undefined ? "body" : (PLACES[first] ?? first);
  for (const segment of rest) {
    if (/^\d+$/.test(segment)) location += `[${segment}]`;
    else if (/^[A-Za-z_$][\w$-]*$/.test(segment)) location += `.${segment}`;
    else location += `[${JSON.stringify(segment)}]`;
  }
  return location;
}
