import { RE2JS } from "re2js";
import type { RouteRewrite } from "../../storage/route-records.js";
import type { Problems } from "./problems.js";

/**
 * How a route makes the path it sends upstream from the request's (before the upstream's own path is put in
 * front): the route's prefix removed (`stripSegments` segments), then the first match of `pattern` replaced.
 */
export interface PathRewrite {
  /** The segments of the route's prefix to remove; 0 keeps the path whole. */
  stripSegments: number;
  pattern?: RE2JS;
  replacement?: string;
}

/**
 * A route's `stripPrefix` and `rewrite` compiled against its prefix (normalised: no trailing slash, "" for "/");
 * undefined when the route keeps its paths as they are. Problems pushed with their field (`field("rewrite.regex")`).
 */
export function compilePathRewrite(
  prefix: string,
  stripPrefix: boolean | undefined,
  rewrite: RouteRewrite | undefined,
  field: (name: string) => string,
  problems: Problems,
): PathRewrite | undefined {
  const stripSegments = stripPrefix === true && prefix !== "" ? prefix.split("/").length - 1 : 0;
  if (rewrite === undefined) return stripSegments > 0 ? { stripSegments } : undefined;
  let pattern: RE2JS;
  try {
    pattern = RE2JS.compile(rewrite.regex);
  } catch (error) {
    problems.push({ at: field("rewrite.regex"), message: `is not a valid RE2 regular expression: ${(error as Error).message}` });
    return undefined;
  }
  // `$$` is a dollar sign; `$1` to `$99` name groups (String.prototype.replace's rules, as re2js applies them).
  for (const [, group] of rewrite.replacement.matchAll(/\$(?:\$|(\d{1,2}))/g)) {
    const number = group === undefined ? 0 : Number(group.length === 2 && Number(group) > pattern.groupCount() ? group[0] : group);
    if (number > pattern.groupCount()) {
      problems.push({
        at: field("rewrite.replacement"),
        message: `names group $${number}, but the regex has ${pattern.groupCount()} group${pattern.groupCount() === 1 ? "" : "s"}`,
      });
      return undefined;
    }
  }
  return { stripSegments, pattern, replacement: rewrite.replacement };
}

/**
 * The path a request is sent upstream with, before the upstream's own path: `path` (as the client sent it, escapes
 * kept) without the route's prefix when it strips it ("" when the prefix was the whole path), then rewritten. A
 * rewritten path that does not start with '/' gets one. The caller checks the result for dot segments.
 */
export function rewritePath(rewrite: PathRewrite, path: string): string {
  let rest = path;
  if (rewrite.stripSegments > 0) {
    // The route matched on segment boundaries, and its prefix has as many '/' as segments ('/' is never decoded).
    let at = 0;
    for (let segment = 0; segment <= rewrite.stripSegments && at !== -1; segment++) at = path.indexOf("/", at + (segment === 0 ? 0 : 1));
    rest = at === -1 ? "" : path.slice(at);
  }
  if (rewrite.pattern === undefined) return rest;
  const rewritten = rewrite.pattern.matcher(rest).replaceFirst(rewrite.replacement as string);
  return rewritten === "" || rewritten.startsWith("/") ? rewritten : `/${rewritten}`;
}
