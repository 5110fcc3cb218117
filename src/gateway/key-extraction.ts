import type { KeySource } from "./route-table.js";

/**
 * The API key of a request, from the route's header (after its scheme, matched ignoring case) or query parameter
 * (read from `query`, the request's query string, parsed only for a query parameter); undefined when absent or empty.
 */
export function extractKey(source: KeySource, headers: Record<string, string | string[] | undefined>, query: string): string | undefined {
  if (source.kind === "query") {
    const value = query === "" ? undefined : new URLSearchParams(query).get(source.parameter)?.trim();
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
