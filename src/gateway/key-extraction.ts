import type { KeySource } from "../domain/routes/policy-compiler.js";

/**
 * The API key of a request, from the first of `sources` that holds one: a header (after its required scheme,
 * matched ignoring case, or with its optional prefix stripped) or a query parameter of `query` (the request's query
 * string, parsed only for a query parameter). Undefined when none holds a non-empty key.
 */
export function extractKey(
  sources: readonly KeySource[],
  headers: Record<string, string | string[] | undefined>,
  query: string,
): string | undefined {
  for (const source of sources) {
    const key = source.kind === "query" ? fromQuery(source.parameter, query) : fromHeader(source, headers);
    if (key) return key;
  }
  return undefined;
}

function fromQuery(parameter: string, query: string): string | undefined {
  return query === "" ? undefined : new URLSearchParams(query).get(parameter)?.trim();
}

function fromHeader(
  source: Extract<KeySource, { kind: "header" }>,
  headers: Record<string, string | string[] | undefined>,
): string | undefined {
  const raw = headers[source.header];
  const value = (Array.isArray(raw) ? raw[0] : raw)?.trim();
  if (!value) return undefined;
  if (source.scheme !== undefined) {
    const space = value.indexOf(" ");
    if (space <= 0 || value.slice(0, space).toLowerCase() !== source.scheme.toLowerCase()) return undefined;
    return value.slice(space + 1).trim();
  }
  const prefix = source.stripPrefix;
  if (prefix !== undefined && value.toLowerCase().startsWith(prefix.toLowerCase())) return value.slice(prefix.length).trim();
  return value;
}
