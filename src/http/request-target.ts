/** A request target (`request.url`: path and query string) split once. */
export interface RequestTarget {
  /** Up to the first '?', as received. */
  path: string;
  /** What follows the first '?', without it; "" when there is none. */
  query: string;
}

export function splitTarget(url: string): RequestTarget {
  const queryAt = url.indexOf("?");
  return queryAt === -1 ? { path: url, query: "" } : { path: url.slice(0, queryAt), query: url.slice(queryAt + 1) };
}

/** The paths of the management API: /v2 and below. No gateway route may take them. */
export const MANAGEMENT_PREFIX = "/v2";

/** Whether a path is the management API's, however its unreserved characters are escaped (`/%762/keys.getKey` too). */
export function isManagementPath(path: string): boolean {
  const same = samePath(path);
  return same.startsWith(MANAGEMENT_PREFIX) && (same.length === MANAGEMENT_PREFIX.length || same[MANAGEMENT_PREFIX.length] === "/");
}

/**
 * The path with its percent-escaped unreserved characters (letters, digits, '-', '.', '_', '~') decoded: RFC 3986
 * (6.2.2.2) makes `/cred%69ts` the same path as `/credits` for every server upstream, so both must take the same
 * route and pay the same. Other escapes (`%2F`, `%20`, …) stay as they are, and so does the path forwarded.
 */
export function samePath(path: string): string {
  if (!path.includes("%")) return path;
  return path.replace(/%([0-9A-Fa-f]{2})/g, (escaped, hex: string) => {
    const character = String.fromCharCode(Number.parseInt(hex, 16));
    return /^[A-Za-z0-9._~-]$/.test(character) ? character : escaped;
  });
}
