import type { KeySource } from "./route-table.js";

/**
 * The API key of a request, from the route's header (after its scheme, matched ignoring case) or query
 * parameter of `url` (the request target, parsed only for a query parameter); undefined when absent or empty.
 */
export function extractKey(source: KeySource, headers: Record<string, string | string[] | undefined>, url: string): string | undefined {
  if (source.kind === "query") {
    const queryAt = url.indexOf("?");
    const value = queryAt === -1 ? undefined : new URLSearchParams(url.slice(queryAt + 1)).get(source.parameter)?.trim();
    return value ? value : undefined;
  }
  const raw = headers[source.header];
  const value = (Array.isArray(raw) ? raw[0] : raw)?.trim();
  if (!value) return undefined;
  if (source.scheme === undefined) return value;
  const space = value.indexOf(" ");
  if (space <= 0 || value.slice(0, space).toLowerCase() !== source.scheme.toLowerCase()) return undefined;
  const key = value.slice(space + 1).trim();
  return key ? key : undefined;
}
