import type { ErrorObject } from "ajv";
import type { ValidationIssue } from "../errors/keygate-error.js";
import { patternWords } from "./patterns.js";

/**
 * Turns Ajv errors into plain-words issues located by JSON path: `/ratelimits/0/name` under root `body`
 * becomes `body.ratelimits[0].name`. The same formatter serves request bodies and the configuration file.
 */
export function toValidationIssues(errors: readonly ErrorObject[], root: string): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const seen = new Set<string>();
  for (const error of errors) {
    const issue = describe(error, root);
    if (!issue) continue;
    const id = `${issue.location}\u0000${issue.message}`;
    if (seen.has(id)) continue;
    seen.add(id);
    issues.push(issue);
  }
  if (issues.length === 0 && errors[0]) {
    issues.push({ location: jsonPath(root, errors[0].instancePath), message: errors[0].message ?? "is invalid" });
  }
  return issues;
}

export function jsonPath(root: string, instancePath: string, child?: string): string {
  let path = root;
  const segments = instancePath === "" ? [] : instancePath.slice(1).split("/");
  if (child !== undefined) segments.push(child);
  for (const raw of segments) {
    const segment = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (/^\d+$/.test(segment)) path += `[${segment}]`;
    else if (/^[A-Za-z_$][\w$]*$/.test(segment)) path += path === "" ? segment : `.${segment}`;
    else path += `[${JSON.stringify(segment)}]`;
  }
  return path;
}

const TYPE_WORDS: Record<string, string> = {
  string: "a string",
  integer: "an integer",
  number: "a number",
  boolean: "a boolean",
  object: "an object",
  array: "an array",
  null: "null",
};

function typeWords(type: unknown): string {
  const types = Array.isArray(type) ? type : String(type).split(",");
  return types.map((t) => TYPE_WORDS[t] ?? String(t)).join(" or ");
}

function plural(n: unknown, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function describe(error: ErrorObject, root: string): ValidationIssue | undefined {
  const params = error.params as Record<string, unknown>;
  const at = jsonPath(root, error.instancePath);
  switch (error.keyword) {
    case "required":
      return {
        location: jsonPath(root, error.instancePath, String(params.missingProperty)),
        message: "is required",
        fix: "add this field",
      };
    case "additionalProperties":
      return {
        location: jsonPath(root, error.instancePath, String(params.additionalProperty)),
        message: "is not a known field",
        fix: "remove this field",
      };
    case "type":
      return { location: at, message: `must be ${typeWords(params.type)}` };
    case "minimum":
      return { location: at, message: `must be greater than or equal to ${params.limit}`, fix: `use a value of at least ${params.limit}` };
    case "maximum":
      return { location: at, message: `must be less than or equal to ${params.limit}`, fix: `use a value of at most ${params.limit}` };
    case "exclusiveMinimum":
      return { location: at, message: `must be greater than ${params.limit}` };
    case "exclusiveMaximum":
      return { location: at, message: `must be less than ${params.limit}` };
    case "minLength":
      return { location: at, message: `must be at least ${plural(params.limit, "character")} long` };
    case "maxLength":
      return { location: at, message: `must be at most ${plural(params.limit, "character")} long` };
    case "pattern": {
      // Every pattern keygate uses is declared with words (src/http/patterns.ts); a test checks it.
      const words = patternWords(String(params.pattern));
      return { location: at, message: words === undefined ? "is not in the expected form" : `must ${words}` };
    }
    case "minItems":
      return { location: at, message: `must contain at least ${plural(params.limit, "item")}` };
    case "maxItems":
      return { location: at, message: `must contain at most ${plural(params.limit, "item")}` };
    case "uniqueItems":
      return { location: at, message: `must not contain duplicates (items ${params.j} and ${params.i} are equal)` };
    case "maxProperties":
      return { location: at, message: `must have at most ${plural(params.limit, "property")}`.replace("propertys", "properties") };
    case "enum":
      return { location: at, message: `must be one of: ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}` };
    case "const":
      return { location: at, message: `must be ${JSON.stringify(params.allowedValue)}` };
    case "format":
      return { location: at, message: `must be a valid ${params.format}` };
    case "anyOf":
    case "oneOf":
    case "if":
      // The branches' own errors say more; the umbrella entry is only kept when it is all there is.
      return undefined;
    default:
      return { location: at, message: error.message ?? "is invalid" };
  }
}
