import type { Ajv, Options as AjvOptions, ErrorObject, Format } from "ajv";
import type { FormatsPlugin } from "ajv-formats";
import type { Document, Operation } from "openapi-backend";
import type { ValidationIssue } from "../errors/keygate-error.js";
import { aboutBody, issueOf } from "./openapi-issues.js";

/**
 * The OpenAPI documents of routes with openapi policies: the check of an upload (keygate.setRouteOpenApi), and a
 * document compiled into what validates requests against it. Request matching and validation are openapi-backend's
 * (its router's request parsing, its Ajv validators per operation); the document is checked against the OpenAPI
 * 3.0 or 3.1 schema by @seriousme/openapi-schema-validator, since openapi-backend's own check knows only 3.0's
 * schema. Both are loaded on first use: a keygate whose routes have no document never pays their start-up.
 */

/** What a request is validated as: its method, the path as the client sent it, its query string, headers and body. */
export interface RequestParts {
  method: string;
  path: string;
  /** Without the '?'. */
  query: string;
  headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The body, parsed from JSON; absent when the body is not validated. */
  body?: unknown;
}

/** An operation of the document a request matched, or why none did. */
export type OperationMatch = { kind: "operation"; operation: Operation } | { kind: "refused"; issue: ValidationIssue };

/** A route's OpenAPI document, compiled: matches a request to an operation and validates it. Immutable. */
export interface OpenApiDocument {
  /** When the document was uploaded: a route whose upload is the same keeps its compiled document. */
  readonly uploadedAt: number;
  /** The operation of the document a request's method and path come to (HEAD falls back to GET). */
  match(method: string, path: string): OperationMatch;
  /** Problems of a request that matched `operation`; none when valid. Without `body`, the body is not validated. */
  validate(operation: Operation, request: RequestParts): ValidationIssue[];
}

/** The OpenAPI versions keygate validates requests with. */
const SUPPORTED_VERSION = /^3\.[01]\.\d+(-.+)?$/;

/** How many of the schema check's problems an upload's refusal names. */
const MAX_DOCUMENT_PROBLEMS = 5;

/**
 * What is wrong with an OpenAPI document's text for a route's openapi policies (empty when it can be used): it must
 * be JSON or YAML, an OpenAPI 3.0 or 3.1 document valid against the specification's schema, with references only
 * within itself, and its schemas must compile into request validators.
 */
export async function openApiDocumentProblems(text: string): Promise<string[]> {
  const parsed = await parseDocument(text);
  if (typeof parsed === "string") return [parsed];
  const { Validator } = await import("@seriousme/openapi-schema-validator");
  // The validator is given the parsed object: given text without a line break, it would read it as a file's name.
  const checked = await new Validator().validate(parsed);
  if (!checked.valid) return schemaProblems(checked.errors);
  try {
    await compileOpenApiDocument(text, 0);
  } catch (error) {
    return [`cannot validate requests: ${error instanceof Error ? error.message : String(error)}`];
  }
  return [];
}

/**
 * Compiles a document's text (one that passed openApiDocumentProblems) into request validators for every operation,
 * at once: nothing is compiled per request. Throws when the document cannot be compiled.
 */
export async function compileOpenApiDocument(text: string, uploadedAt: number): Promise<OpenApiDocument> {
  const parsed = await parseDocument(text);
  if (typeof parsed === "string") throw new Error(`the document ${parsed}`);
  const libraries = await loadLibraries();
  const version31 = String(parsed.openapi).startsWith("3.1");
  if (!version31) normaliseExclusiveBounds(parsed);
  // References within the document only: one to another document or a URL is never fetched (the upload refuses it).
  const definition = new libraries.Validator().resolveRefs({ specification: parsed }) as unknown as Document;
  giveOperationIds(definition);
  const router = new libraries.OpenAPIRouter({ definition });
  const validator = new libraries.OpenAPIValidator({
    definition,
    router,
    // Compiled below, request validators only (no response is validated).
    lazyCompileValidators: true,
    // At most one error per validator (parameters, body): allErrors is unsafe with untrusted input. Unknown
    // keywords (example, xml, discriminator) are ignored, and Ajv logs nothing.
    ajvOpts: { strict: false, logger: false, allErrors: false },
    customizeAjv: sharedAjv(libraries, version31),
  });
  validator.preCompileRequestValidators();
  const matcher = new OperationMatcher(router.getOperations());
  return {
    uploadedAt,
    match: (method, path) => matcher.match(method, path),
    validate: (operation, request) => {
      const result = validator.validateRequest(
        {
          method: operation.method,
          path: request.path,
          query: request.query,
          headers: request.headers as Record<string, string | string[]>,
          // openapi-backend parses a body that is not an object as JSON text: a string, number or boolean goes as such.
          body: request.body === undefined || typeof request.body === "object" ? request.body : JSON.stringify(request.body),
        },
        operation,
      );
      const errors = (result.errors ?? []) as ErrorObject[];
      const validated = request.body === undefined ? errors.filter((error) => !aboutBody(error)) : errors;
      return validated.map(issueOf);
    },
  };
}

/** The libraries a document is checked and compiled with, loaded once. */
interface Libraries {
  Validator: typeof import("@seriousme/openapi-schema-validator").Validator;
  OpenAPIRouter: typeof import("openapi-backend").OpenAPIRouter;
  OpenAPIValidator: typeof import("openapi-backend").OpenAPIValidator;
  Ajv2020: typeof import("ajv/dist/2020.js").Ajv2020;
  addFormats: FormatsPlugin;
}

let libraries: Promise<Libraries> | undefined;

function loadLibraries(): Promise<Libraries> {
  libraries ??= Promise.all([
    import("@seriousme/openapi-schema-validator"),
    import("openapi-backend"),
    import("ajv/dist/2020.js"),
    import("ajv-formats"),
  ]).then(([schemaValidator, backend, ajv2020, formats]) => ({
    Validator: schemaValidator.Validator,
    OpenAPIRouter: backend.OpenAPIRouter,
    OpenAPIValidator: backend.OpenAPIValidator,
    Ajv2020: ajv2020.Ajv2020,
    // A CommonJS module: its `default` is module.exports, which has the plugin as its own `default` too.
    addFormats: formats.default.default,
  }));
  return libraries as Promise<Libraries>;
}

/** The document's text parsed (JSON or YAML, the YAML parser loaded on demand), or what is wrong with it. */
async function parseDocument(text: string): Promise<Record<string, unknown> | string> {
  let document: unknown;
  try {
    document = text.trimStart().startsWith("{") ? JSON.parse(text) : (await import("yaml")).parse(text);
  } catch (error) {
    return `is neither JSON nor YAML: ${error instanceof Error ? error.message : String(error)}`;
  }
  if (document === null || typeof document !== "object" || Array.isArray(document)) return "must be an OpenAPI document (an object)";
  const { openapi } = document as { openapi?: unknown };
  if (typeof openapi !== "string" || !SUPPORTED_VERSION.test(openapi)) {
    return "must be an OpenAPI 3.0 or 3.1 document ('openapi: 3.0.x' or '3.1.x')";
  }
  return document as Record<string, unknown>;
}

/** The schema check's problems, each with where in the document (a JSON pointer) and what. */
function schemaProblems(errors: ErrorObject[] | string | undefined): string[] {
  if (errors === undefined) return ["is not a valid OpenAPI document"];
  if (typeof errors === "string") return [errors.replace(/\.$/, "")];
  return errors.slice(0, MAX_DOCUMENT_PROBLEMS).map((error) => `at #${error.instancePath}: ${error.message ?? "is not valid"}`);
}

/**
 * OpenAPI 3.0 writes exclusive bounds as JSON Schema draft 4 did (`maximum: 5, exclusiveMaximum: true`); Ajv takes
 * them as later drafts do (`exclusiveMaximum: 5`). Rewritten in place, in the document's private copy.
 */
function normaliseExclusiveBounds(node: unknown): void {
  if (node === null || typeof node !== "object") return;
  if (Array.isArray(node)) {
    for (const item of node) normaliseExclusiveBounds(item);
    return;
  }
  const schema = node as Record<string, unknown>;
  for (const [exclusive, bound] of [
    ["exclusiveMaximum", "maximum"],
    ["exclusiveMinimum", "minimum"],
  ] as const) {
    if (typeof schema[exclusive] !== "boolean") continue;
    if (schema[exclusive] === true && typeof schema[bound] === "number") {
      schema[exclusive] = schema[bound];
      delete schema[bound];
    } else delete schema[exclusive];
  }
  for (const value of Object.values(schema)) normaliseExclusiveBounds(value);
}

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const;

/**
 * openapi-backend keeps an operation's validators by operationId; a document need not give one, nor keep them
 * unique. Every operation gets keygate's own (`GET /items/{id}`), in the private copy (path items and operations
 * shared through references are copied first, so each operation has its own id).
 */
function giveOperationIds(definition: Document): void {
  const paths = (definition.paths ?? {}) as Record<string, Record<string, unknown> | undefined>;
  for (const [path, item] of Object.entries(paths)) {
    if (item === undefined || item === null || typeof item !== "object") continue;
    const copy: Record<string, unknown> = { ...item };
    for (const method of METHODS) {
      const operation = copy[method];
      if (operation === null || typeof operation !== "object") continue;
      const id = `${method.toUpperCase()} ${path}`;
      // A copy of the document's own JSON keeps a spread's semantics (a "__proto__" key stays a key); the id is then
      // assigned rather than spread after it (docs/architecture.md#conventions).
      const withId: Record<string, unknown> = { ...(operation as object) };
      withId.operationId = id;
      copy[method] = withId;
    }
    paths[path] = copy;
  }
}

/** The formats OpenAPI defines beyond JSON Schema's (openapi-backend adds them to the Ajv instances it makes). */
const OPENAPI_FORMATS: Record<string, Format> = {
  int32: { type: "number", validate: (value: number) => Number.isInteger(value) && value >= -(2 ** 31) && value < 2 ** 31 },
  int64: { type: "number", validate: (value: number) => Number.isInteger(value) },
  float: { type: "number", validate: () => true },
  double: { type: "number", validate: () => true },
  byte: { type: "string", validate: /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/ },
  binary: { type: "string", validate: () => true },
  password: { type: "string", validate: () => true },
};

/**
 * One Ajv instance per kind of validator (body, parameters) for the whole document, rather than one per operation
 * as openapi-backend makes them (compiling 100 operations takes seconds that way). OpenAPI 3.1's schemas are JSON
 * Schema 2020-12 (Ajv2020); 3.0's are read by Ajv's default draft. JSON Schema's formats (date-time, uuid, email...)
 * are checked, and OpenAPI's own.
 */
function sharedAjv(libraries: Libraries, version31: boolean): (ajv: Ajv, options: AjvOptions, context: string) => Ajv {
  const instances = new Map<string, Ajv>();
  return (made, options, context) => {
    const key = `${context} ${options.coerceTypes === true}`;
    let ajv = instances.get(key);
    if (ajv === undefined) {
      ajv = version31 ? (new libraries.Ajv2020(options) as unknown as Ajv) : made;
      libraries.addFormats(ajv);
      for (const [name, format] of Object.entries(OPENAPI_FORMATS)) ajv.addFormat(name, format);
      instances.set(key, ajv);
    }
    return ajv;
  };
}

/** One operation's place in the matching order. */
interface MatchedOperation {
  method: string;
  template: string;
  pattern: RegExp | undefined;
  operation: Operation;
}

/**
 * Finds a request's operation as openapi-backend's router does (an exact path first, then templates, the one with
 * the longest literal part first; trailing slashes ignored), with every path template compiled once, not per request.
 */
class OperationMatcher {
  private readonly exact = new Map<string, MatchedOperation[]>();
  private readonly templated: MatchedOperation[] = [];

  constructor(operations: readonly Operation[]) {
    for (const operation of operations) {
      const templated = /\{[^}]+\}/.test(operation.path);
      const entry: MatchedOperation = {
        method: operation.method,
        template: operation.path,
        pattern: templated ? templatePattern(operation.path) : undefined,
        operation,
      };
      if (templated) this.templated.push(entry);
      else this.exact.set(operation.path, [...(this.exact.get(operation.path) ?? []), entry]);
    }
    const literalLength = (template: string) => template.replace(/\{[^}]*\}/g, "").length;
    this.templated.sort((a, b) => literalLength(b.template) - literalLength(a.template));
  }

  match(method: string, requestPath: string): OperationMatch {
    let path = requestPath;
    while (path.length > 1 && path.endsWith("/")) path = path.slice(0, -1);
    const candidates = [...(this.exact.get(path) ?? []), ...this.templated.filter((entry) => entry.pattern?.test(path))];
    if (candidates.length === 0)
      return { kind: "refused", issue: { location: "path", message: "matches no path of the route's OpenAPI document" } };
    const wanted = method.toLowerCase();
    const found =
      candidates.find((entry) => entry.method === wanted) ??
      (wanted === "head" ? candidates.find((entry) => entry.method === "get") : undefined);
    if (found) return { kind: "operation", operation: found.operation };
    const allowed = [...new Set(candidates.map((entry) => entry.method.toUpperCase()))];
    return { kind: "refused", issue: { location: "method", message: `must be ${allowed.join(" or ")} for this path` } };
  }
}

function templatePattern(template: string): RegExp {
  const literal = template.split(/\{[^}]+\}/).map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(`^${literal.join("[^/]+")}$`);
}
