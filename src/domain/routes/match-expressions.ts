import { RE2JS } from "re2js";
import type { FieldMatch, MatchExpr, StringMatch } from "../../storage/route-records.js";
import type { Problems } from "./problems.js";

export const MAX_MATCH_EXPRESSIONS = 10;

/** The parts of a request a policy's match expressions read. Header names are lower case. */
export interface MatchedRequest {
  method: string;
  /** The path with escaped unreserved characters decoded (samePath). */
  path: string;
  header(name: string): string | undefined;
  /** A query parameter's first value; undefined when absent. */
  queryParam(name: string): string | undefined;
}

export type RequestPredicate = (request: MatchedRequest) => boolean;

/** The predicates of a policy's match expressions, every one of which must hold; problems pushed with their field. */
export function compileMatches(expressions: readonly MatchExpr[], at: string, problems: Problems): RequestPredicate[] {
  if (expressions.length > MAX_MATCH_EXPRESSIONS)
    problems.push({ at: at, message: `must hold at most ${MAX_MATCH_EXPRESSIONS} expressions` });
  const predicates: RequestPredicate[] = [];
  for (const [index, expression] of expressions.entries()) {
    const where = `${at}[${index}]`;
    const set = (["path", "method", "header", "queryParam"] as const).filter((kind) => expression[kind] !== undefined);
    if (set.length !== 1) {
      problems.push({ at: where, message: "must set exactly one of path, method, header or queryParam" });
      continue;
    }
    if (expression.path) {
      const test = compileStringMatch(expression.path.path, `${where}.path.path`, problems);
      if (test) predicates.push((request) => test(request.path));
    } else if (expression.method) {
      const methods = new Set<string>(expression.method.methods);
      predicates.push((request) => methods.has(request.method));
    } else if (expression.header) {
      const name = expression.header.name.toLowerCase();
      const test = compileFieldMatch(expression.header, `${where}.header`, problems);
      if (test) predicates.push((request) => test(request.header(name)));
    } else if (expression.queryParam) {
      const name = expression.queryParam.name;
      const test = compileFieldMatch(expression.queryParam, `${where}.queryParam`, problems);
      if (test) predicates.push((request) => test(request.queryParam(name)));
    }
  }
  return predicates;
}

/** A header or query parameter: `present`, or a value that matches; an absent field matches neither. */
function compileFieldMatch(field: FieldMatch, at: string, problems: Problems): ((value: string | undefined) => boolean) | undefined {
  if ((field.present === undefined) === (field.value === undefined)) {
    problems.push({ at: at, message: "must set exactly one of present or value" });
    return undefined;
  }
  if (field.present) return (value) => value !== undefined;
  const test = compileStringMatch(field.value as StringMatch, `${at}.value`, problems);
  return test && ((value) => value !== undefined && test(value));
}

/** A string matcher; a regex is RE2 (linear-time matching, no backtracking) and matches anywhere in the input. */
export function compileStringMatch(match: StringMatch, at: string, problems: Problems): ((input: string) => boolean) | undefined {
  const set = (["exact", "prefix", "regex"] as const).filter((mode) => match[mode] !== undefined);
  if (set.length !== 1) {
    problems.push({ at: at, message: "must set exactly one of exact, prefix or regex" });
    return undefined;
  }
  const ignoreCase = match.ignoreCase === true;
  if (match.regex !== undefined) {
    let pattern: RE2JS;
    try {
      pattern = RE2JS.compile(match.regex, ignoreCase ? RE2JS.CASE_INSENSITIVE : 0);
    } catch (error) {
      problems.push({
        at: `${at}.regex`,
        message: `is not a valid RE2 regular expression: ${error instanceof Error ? error.message : String(error)}`,
      });
      return undefined;
    }
    return (input) => pattern.matcher(input).find();
  }
  const expected = ignoreCase ? (match.exact ?? match.prefix ?? "").toLowerCase() : (match.exact ?? match.prefix ?? "");
  const fold = ignoreCase ? (input: string) => input.toLowerCase() : (input: string) => input;
  return match.exact !== undefined ? (input) => fold(input) === expected : (input) => fold(input).startsWith(expected);
}
