import t from "tap";
import { validateConfig } from "../../src/config/load.js";
import { CurrentGatewaySnapshot, compileGatewaySnapshot } from "../../src/gateway/gateway-snapshot.js";
import {
  compileOpenApiDocument,
  type OpenApiDocument,
  openApiDocumentProblems,
  type RequestParts,
} from "../../src/gateway/openapi-documents.js";
import { locationOf } from "../../src/gateway/openapi-issues.js";
import { RouteSync } from "../../src/gateway/route-sync.js";
import { MemoryRouteStore } from "../../src/storage/memory/route-store.js";
import type { RouteRecord } from "../../src/storage/route-records.js";

/** A document of either version with the same operations; `nullable` written each version's way. */
function itemsDocument(version: "3.0.3" | "3.1.0"): Record<string, unknown> {
  const v31 = version === "3.1.0";
  return {
    openapi: version,
    info: { title: "items", version: "1" },
    components: {
      schemas: {
        Item: {
          type: "object",
          required: ["name"],
          properties: {
            name: v31 ? { type: ["string", "null"], minLength: 2 } : { type: "string", nullable: true, minLength: 2 },
            count: v31 ? { type: "integer", exclusiveMaximum: 5 } : { type: "integer", maximum: 5, exclusiveMaximum: true },
            at: { type: "string", format: "date-time" },
            child: { $ref: "#/components/schemas/Item" },
          },
        },
      },
    },
    paths: {
      "/items": {
        get: {
          parameters: [{ name: "limit", in: "query", required: true, schema: { type: "integer", minimum: 1 } }],
          responses: { "200": { description: "ok" } },
        },
      },
      "/items/new": { get: { operationId: "same", responses: { "200": { description: "ok" } } } },
      "/items/{id}": {
        parameters: [{ name: "id", in: "path", required: true, schema: { type: "integer" } }],
        get: { operationId: "same", responses: { "200": { description: "ok" } } },
        post: {
          parameters: [{ name: "X-Tenant", in: "header", required: true, schema: { type: "string", enum: ["acme", "globex"] } }],
          requestBody: {
            required: true,
            content: {
              "application/json": {
                schema: {
                  type: "object",
                  required: ["items"],
                  properties: { items: { type: "array", items: { $ref: "#/components/schemas/Item" } } },
                },
              },
            },
          },
          responses: { "200": { description: "ok" } },
        },
      },
    },
  };
}

const parts = (fields: Partial<RequestParts> & { path: string }): RequestParts => ({
  method: "GET",
  query: "",
  headers: {},
  ...fields,
});

/** The issues of a request: its operation's validation, or the refusal of its match. */
function issues(document: OpenApiDocument, request: RequestParts) {
  const matched = document.match(request.method, request.path);
  return matched.kind === "refused" ? [matched.issue] : document.validate(matched.operation, request);
}

t.test("the upload check takes OpenAPI 3.0 and 3.1 documents, as YAML or JSON", async (t) => {
  t.same(await openApiDocumentProblems(JSON.stringify(itemsDocument("3.1.0"))), []);
  t.same(await openApiDocumentProblems(JSON.stringify(itemsDocument("3.0.3"), null, 2)), []);
  const yaml =
    "openapi: 3.0.3\ninfo:\n  title: t\n  version: '1'\npaths:\n  /a:\n    get:\n      responses:\n        '200':\n          description: ok\n";
  t.same(await openApiDocumentProblems(yaml), []);
  t.same(await openApiDocumentProblems('{"openapi":"3.1.0","info":{"title":"t","version":"1"},"webhooks":{}}'), [], "3.1 needs no paths");
});

t.test("the upload check names what is wrong, in the library's words", async (t) => {
  t.match(await openApiDocumentProblems("{ not json"), [/^is neither JSON nor YAML: /]);
  t.match(await openApiDocumentProblems("openapi: [unclosed"), [/^is neither JSON nor YAML: /]);
  t.match(await openApiDocumentProblems("- a list"), ["must be an OpenAPI document (an object)"]);
  t.match(await openApiDocumentProblems('{"swagger":"2.0","info":{"title":"t","version":"1"},"paths":{}}'), [/OpenAPI 3\.0 or 3\.1/]);
  t.match(await openApiDocumentProblems('{"openapi":"3.2.0","info":{"title":"t","version":"1"},"paths":{}}'), [/OpenAPI 3\.0 or 3\.1/]);
  t.match(await openApiDocumentProblems("openapi: 3.0.3\ninfo: {title: t}\npaths: {}\n"), [
    "at #/info: must have required property 'version'",
  ]);
  const external = { ...itemsDocument("3.1.0"), paths: { "/a": { $ref: "https://example.invalid/paths.yaml" } } };
  t.match(await openApiDocumentProblems(JSON.stringify(external)), [
    /Can't resolve https:\/\/example\.invalid\/paths\.yaml, only internal refs/,
  ]);
  const badPattern = {
    openapi: "3.1.0",
    info: { title: "t", version: "1" },
    paths: {
      "/a": {
        get: {
          parameters: [{ name: "q", in: "query", schema: { type: "string", pattern: "(" } }],
          responses: { "200": { description: "ok" } },
        },
      },
    },
  };
  t.match(await openApiDocumentProblems(JSON.stringify(badPattern)), [/^cannot validate requests: .*regular expression/i]);
  // A one-line text is never taken for a file's name.
  t.match(await openApiDocumentProblems("/etc/passwd"), [/OpenAPI document|OpenAPI 3\.0 or 3\.1/]);
});

for (const version of ["3.0.3", "3.1.0"] as const) {
  t.test(`OpenAPI ${version}: requests are matched to operations and validated`, async (t) => {
    const document = await compileOpenApiDocument(JSON.stringify(itemsDocument(version)), 7);
    t.equal(document.uploadedAt, 7);

    t.same(issues(document, parts({ path: "/items", query: "limit=3" })), [], "a valid request");
    t.same(issues(document, parts({ path: "/items/", query: "limit=3" })), [], "a trailing slash is ignored");
    t.same(issues(document, parts({ method: "HEAD", path: "/items", query: "limit=3" })), [], "HEAD is validated as GET");
    t.same(issues(document, parts({ path: "/items/new" })), [], "an exact path before a template");
    t.same(issues(document, parts({ path: "/items/12" })), [], "operations may share an operationId, or have none");
    t.same(issues(document, parts({ path: "/nothing" })), [
      { location: "path", message: "matches no path of the route's OpenAPI document" },
    ]);
    t.same(issues(document, parts({ method: "DELETE", path: "/items/12" })), [
      { location: "method", message: "must be GET or POST for this path" },
    ]);
    t.same(issues(document, parts({ path: "/items/twelve" })), [{ location: "path.id", message: "must be an integer" }]);
    t.same(issues(document, parts({ path: "/items" })), [{ location: "query.limit", message: "is required" }]);
    t.same(issues(document, parts({ path: "/items", query: "limit=0" })), [{ location: "query.limit", message: "must be >= 1" }]);
    t.same(issues(document, parts({ path: "/items", query: "limit=2&limt=3" })), [
      { location: "query.limt", message: "is not a parameter of this operation" },
    ]);

    const post = (headers: RequestParts["headers"], body?: unknown) =>
      issues(document, parts({ method: "POST", path: "/items/12", headers: { "content-type": "application/json", ...headers }, body }));
    t.same(post({ "x-tenant": "acme" }, { items: [{ name: "ok", count: 4, at: "2026-01-02T03:04:05Z" }] }), []);
    t.same(post({ "x-tenant": "acme" }), [], "without a body, the body is not validated");
    t.same(post({}, { items: [] }), [{ location: "header.x-tenant", message: "is required" }], "header names in any case");
    t.same(post({ "x-tenant": "initech" }, { items: [] }), [{ location: "header.x-tenant", message: 'must be one of "acme", "globex"' }]);
    t.same(post({ "x-tenant": "acme" }, { items: [{ name: "x" }] }), [
      { location: "body.items[0].name", message: "must NOT have fewer than 2 characters" },
    ]);
    t.same(post({ "x-tenant": "acme" }, { items: [{ name: null }] }), [], "nullable, each version's way");
    t.same(post({ "x-tenant": "acme" }, { items: [{ name: "ok", count: 5 }] }), [
      { location: "body.items[0].count", message: "must be < 5" },
    ]);
    t.same(post({ "x-tenant": "acme" }, { items: [{ name: "ok", at: "yesterday" }] }), [
      { location: "body.items[0].at", message: 'must match format "date-time"' },
    ]);
    t.same(
      post({ "x-tenant": "acme" }, { items: [{ name: "ok", child: { name: "ok", child: {} } }] }),
      [{ location: "body.items[0].child.child.name", message: "is required" }],
      "a recursive schema",
    );
    t.same(post({ "x-tenant": "acme" }, "items"), [{ location: "body", message: "must be an object" }]);
    t.same(post({ "x-tenant": "acme" }, null), [{ location: "body", message: "must be an object" }]);
    t.same(
      post({}, { items: 3 }),
      [
        { location: "body.items", message: "must be an array" },
        { location: "header.x-tenant", message: "is required" },
      ],
      "the body's problem and the parameters' problem",
    );
  });
}

t.test("OpenAPI 3.1 schemas are JSON Schema 2020-12", async (t) => {
  const document = await compileOpenApiDocument(
    JSON.stringify({
      openapi: "3.1.0",
      info: { title: "t", version: "1" },
      paths: {
        "/pairs": {
          post: {
            requestBody: {
              content: {
                "application/json": {
                  schema: { type: "array", prefixItems: [{ const: "pair" }, { type: "integer" }], items: false },
                },
              },
            },
            responses: {},
          },
        },
      },
    }),
    1,
  );
  const post = (body: unknown) =>
    issues(document, parts({ method: "POST", path: "/pairs", headers: { "content-type": "application/json" }, body }));
  t.same(post(["pair", 2]), []);
  t.same(post(["pear", 2]), [{ location: "body[0]", message: "must be equal to constant" }]);
  t.same(post(["pair", 2, 3]), [{ location: "body", message: "must NOT have more than 2 items" }]);
});

t.test("locations name each place as a path into the request", async (t) => {
  t.equal(locationOf(["requestBody", "items", "0", "name"]), "body.items[0].name");
  t.equal(locationOf(["header", "x-tenant"]), "header.x-tenant");
  t.equal(locationOf(["requestBody", "a.b", "with space"]), 'body["a.b"]["with space"]');
  t.equal(locationOf([]), "body");
});

/** A logger that keeps what is logged at error. */
function quietLog() {
  const errors: { details: Record<string, unknown>; message: string }[] = [];
  const log = {
    info: () => {},
    warn: () => {},
    error: (details: Record<string, unknown>, message: string) => void errors.push({ details, message }),
  };
  return { errors, log: log as unknown as ConstructorParameters<typeof RouteSync>[0]["log"] };
}

t.test("documents are compiled with the route table, kept while their upload is unchanged", async (t) => {
  const store = new MemoryRouteStore();
  const snapshot = new CurrentGatewaySnapshot(compileGatewaySnapshot(validateConfig({})));
  const { errors, log } = quietLog();
  const sync = new RouteSync({ snapshot, store, log });
  const route = (id: string, fields: Partial<RouteRecord> = {}): RouteRecord => ({
    id,
    workspaceId: "ws",
    name: id,
    match: { prefix: `/${id}` },
    upstream: "http://127.0.0.1:1",
    policies: [{ id: `pol_${id}`, name: "validate", enabled: true, openapi: {} }],
    createdAt: 1,
    updatedAt: 1,
    ...fields,
  });
  const text = JSON.stringify(itemsDocument("3.1.0"));
  const write = (routes: RouteRecord[], openApi?: { routeId: string; text: string | null }) =>
    store.update(() => (openApi ? { result: undefined, routes, openApi } : { result: undefined, routes }));

  await write([route("rt_a", { openApi: { uploadedAt: 10 } })], { routeId: "rt_a", text });
  await sync.refresh();
  const first = snapshot.current.openApi.get("rt_a");
  t.equal(first?.uploadedAt, 10, "compiled when the table was taken up");

  await write([route("rt_a", { openApi: { uploadedAt: 10 } }), route("rt_b")]);
  await sync.refresh();
  t.equal(snapshot.current.openApi.get("rt_a"), first, "the same upload keeps its compiled document");
  t.equal(snapshot.current.openApi.has("rt_b"), false, "a route without a document has none");

  await write([route("rt_a", { openApi: { uploadedAt: 11 } })], { routeId: "rt_a", text });
  await sync.refresh();
  t.not(snapshot.current.openApi.get("rt_a"), first, "a new upload is compiled again");
  const compiled = snapshot.current.openApi;
  snapshot.applyConfig({ routes: [], gateway: snapshot.current.settings });
  t.equal(snapshot.current.openApi, compiled, "a configuration reload keeps the compiled documents");

  await write([route("rt_a", { openApi: { uploadedAt: 11 }, policies: [{ id: "pol", name: "validate", enabled: false, openapi: {} }] })]);
  await sync.refresh();
  t.equal(snapshot.current.openApi.has("rt_a"), false, "a route whose openapi policy is disabled has no document compiled");

  const broken = JSON.stringify({
    ...itemsDocument("3.1.0"),
    paths: { "/a": { get: { parameters: [{ name: "q", in: "query", schema: { pattern: "(" } }], responses: {} } } },
  });
  await write([route("rt_a", { openApi: { uploadedAt: 12 } })], { routeId: "rt_a", text: broken });
  await sync.refresh();
  t.equal(snapshot.current.openApi.has("rt_a"), false, "a document that does not compile leaves the route without one");
  t.match(errors, [{ details: { route: "rt_a" }, message: /OpenAPI document does not compile/ }]);
  await write([route("rt_a", { openApi: { uploadedAt: 12 } }), route("rt_c")]);
  await sync.refresh();
  t.equal(errors.length, 1, "and is not compiled, nor logged, again while its upload is the same");
});
