import { parse as parseYaml } from "yaml";

/**
 * What is wrong with an OpenAPI document's text for a route's openapi policies: it must be JSON or YAML, OpenAPI
 * 3.0 or 3.1, with `paths`. Empty when it can be used.
 */
export function openApiDocumentProblems(text: string): string[] {
  let document: unknown;
  try {
    document = text.trimStart().startsWith("{") ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    return [`is neither JSON nor YAML: ${error instanceof Error ? error.message : String(error)}`];
  }
  if (document === null || typeof document !== "object" || Array.isArray(document)) return ["must be an OpenAPI document (an object)"];
  const { openapi, paths } = document as { openapi?: unknown; paths?: unknown };
  if (typeof openapi !== "string" || !/^3\.[01]\.\d+$/.test(openapi))
    return ["must be an OpenAPI 3.0 or 3.1 document ('openapi: 3.0.x' or '3.1.x')"];
  if (paths === null || typeof paths !== "object" || Array.isArray(paths)) return ["must have 'paths'"];
  return [];
}
