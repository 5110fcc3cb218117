import { DEFAULT_DOCS_URL, ERROR_CATALOGUE, errorTypeUrl } from "../../src/errors/catalogue.js";

/** The catalogue's status for each error type URL, to check that an answer's type and status agree. */
const STATUS_OF_TYPE = new Map(
  Object.entries(ERROR_CATALOGUE).map(([code, entry]) => [
    errorTypeUrl(code as keyof typeof ERROR_CATALOGUE, DEFAULT_DOCS_URL),
    entry.status,
  ]),
);

export interface AnswerToCheck {
  status: number;
  /** Header values by lower-case name. */
  headers: Record<string, string | string[] | number | undefined>;
  /** The body as sent (empty for HEAD). */
  body: string | Buffer;
  /** HEAD answers have no body: only the status and x-request-id can be checked. */
  head?: boolean;
}

/**
 * What is wrong with an answer keygate made itself, or undefined when it is right: not a 5xx; JSON; either the
 * success envelope (`meta.requestId`, `data`) or the error envelope of docs/errors.md (`meta.requestId` req_...,
 * `error.title/detail/status/type` with a catalogue type whose status is the HTTP status, `errors[]` on 400);
 * and `x-request-id` equal to `meta.requestId`.
 */
export function envelopeProblem(answer: AnswerToCheck): string | undefined {
  if (answer.status >= 500) return `status ${answer.status}`;
  const requestIdHeader = answer.headers["x-request-id"];
  if (typeof requestIdHeader !== "string" || !/^req_[1-9A-HJ-NP-Za-km-z]+$/.test(requestIdHeader))
    return `x-request-id is ${JSON.stringify(requestIdHeader)}`;
  if (answer.head) return undefined;
  const contentType = String(answer.headers["content-type"] ?? "");
  if (!/^application\/(problem\+)?json/.test(contentType)) return `content-type is ${JSON.stringify(contentType)}`;
  let body: any;
  try {
    body = JSON.parse(answer.body.toString());
  } catch {
    return "the body is not JSON";
  }
  if (body === null || typeof body !== "object") return "the body is not an object";
  if (body.meta?.requestId !== requestIdHeader)
    return `meta.requestId ${JSON.stringify(body.meta?.requestId)} differs from x-request-id ${requestIdHeader}`;
  if (answer.status >= 200 && answer.status < 300) return "data" in body ? undefined : "a success without data";
  const error = body.error;
  if (error === null || typeof error !== "object") return "no error object";
  if (typeof error.title !== "string" || error.title === "") return "error.title missing";
  if (typeof error.detail !== "string" || error.detail === "") return "error.detail missing";
  if (error.status !== answer.status) return `error.status ${error.status} differs from the HTTP status ${answer.status}`;
  const catalogued = STATUS_OF_TYPE.get(error.type);
  if (catalogued === undefined) return `error.type ${JSON.stringify(error.type)} is not in the catalogue`;
  if (catalogued !== answer.status) return `error.type ${error.type} has status ${catalogued} in the catalogue, not ${answer.status}`;
  if (answer.status === 400 && !Array.isArray(error.errors)) return "a 400 without errors[]";
  return undefined;
}

/** The error code's last part (`invalid_input`) of an envelope body, or undefined. */
export function errorName(body: string | Buffer): string | undefined {
  try {
    const type = JSON.parse(body.toString())?.error?.type;
    return typeof type === "string" ? type.split("/").pop() : undefined;
  } catch {
    return undefined;
  }
}

/** A short, printable form of a request or answer body for failure messages. */
export function excerpt(value: unknown, max = 160): string {
  const text = typeof value === "string" ? value : Buffer.isBuffer(value) ? value.toString("latin1") : JSON.stringify(value);
  const printable = (text ?? String(value)).replace(
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this escapes
    /[\u0000-\u001f\u007f-\uffff]/g,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
  return printable.length > max ? `${printable.slice(0, max)}... (${text.length} chars)` : printable;
}

interface Asserts {
  pass(message: string): void;
  fail(message: string): void;
}

/** One passing assertion when nothing went wrong, else one failure per problem (the first 25), each on one line. */
export function report(t: Asserts, problems: readonly string[], summary: string): void {
  if (problems.length === 0) {
    t.pass(summary);
    return;
  }
  for (const problem of problems.slice(0, 25)) t.fail(`${summary}: ${problem}`);
  if (problems.length > 25) t.fail(`${summary}: ${problems.length - 25} more problems`);
}
