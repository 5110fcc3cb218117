import { defined } from "../lib/defined.js";
import { ERROR_CATALOGUE, type ErrorCode } from "./catalogue.js";

/** One problem found by validation: where (`body.ratelimits[0].name`), what, and how to fix it where we can tell. */
export interface ValidationIssue {
  location: string;
  message: string;
  fix?: string;
}

/**
 * The one exception type of the domain and the HTTP layer. `detail` is shown to the client; `cause` is only
 * logged. Denials that are part of an answer (a key that is not valid, a limit that is hit) are results, not errors.
 */
export class KeygateError extends Error {
  readonly code: ErrorCode;
  readonly detail: string;
  readonly errors: ValidationIssue[] | undefined;
  /** Extra response headers the error implies (e.g. Retry-After, WWW-Authenticate). */
  readonly headers: Record<string, string> | undefined;

  constructor(
    code: ErrorCode,
    detail: string,
    options: { errors?: ValidationIssue[]; cause?: unknown; headers?: Record<string, string> } = {},
  ) {
    super(detail, { cause: options.cause });
    this.name = "KeygateError";
    this.code = code;
    this.detail = detail;
    this.errors = options.errors;
    this.headers = options.headers;
  }

  get status(): number {
    return ERROR_CATALOGUE[this.code].status;
  }
}

export function isKeygateError(error: unknown): error is KeygateError {
  return error instanceof KeygateError;
}

/** A 400 invalid_input listing every problem; the detail quotes the first one. */
export function invalidInput(issues: ValidationIssue[]): KeygateError {
  const first = issues[0];
  const summary = first ? `${first.location} ${first.message}` : "the body does not match the schema";
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more problem${issues.length > 2 ? "s" : ""}; see errors)` : "";
  return new KeygateError("err:unkey:application:invalid_input", `The request is invalid: ${summary}${more}.`, { errors: issues });
}

/** A 400 invalid_input for one problem the schema could not express (e.g. a rule across fields). */
export function invalidAt(location: string, message: string, fix?: string): KeygateError {
  return invalidInput([{ location, message, ...defined({ fix }) }]);
}
