import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv } from "ajv";
import t from "tap";
import { ERROR_CATALOGUE } from "../../src/errors/catalogue.js";
import { packageVersion } from "../../src/lib/package-version.js";
import { PROCEDURES } from "../../src/routes/v2/index.js";
import { harness } from "../helpers/harness.js";

// GET /v2/openapi.json: a valid OpenAPI 3.1 document of every procedure, generated from the validating schemas;
// /v2/docs renders it from assets served by keygate itself.

/** Every field path a schema names (properties, array items, union members), to compare two schemas' shapes. */
function fieldPaths(schema: any, prefix = ""): string[] {
  if (typeof schema !== "object" || schema === null) return [];
  const paths: string[] = [];
  for (const [name, property] of Object.entries(schema.properties ?? {}))
    paths.push(`${prefix}.${name}`, ...fieldPaths(property, `${prefix}.${name}`));
  if (schema.items) paths.push(...fieldPaths(schema.items, `${prefix}[]`));
  for (const member of [...(schema.anyOf ?? []), ...(schema.oneOf ?? []), ...(schema.allOf ?? [])])
    paths.push(...fieldPaths(member, prefix));
  return [...new Set(paths)].sort();
}

/** The statuses a /v2 call can answer with an error, and their codes, read from the catalogue. */
function v2ErrorCodes(): Map<string, string[]> {
  const codes = new Map<string, string[]>();
  for (const [code, entry] of Object.entries(ERROR_CATALOGUE)) {
    if (code.startsWith("err:keygate:gateway:")) continue;
    codes.set(String(entry.status), [...(codes.get(String(entry.status)) ?? []), code]);
  }
  return codes;
}

const GATEWAY_ROUTES = {
  routes: [{ name: "orders", match: { prefix: "/orders" }, upstream: "http://127.0.0.1:9", apiId: "api_openapi" }],
  apis: [{ id: "api_openapi", name: "openapi", workspaceId: "ws_test" }],
};

t.test("the document is valid OpenAPI 3.1 and describes every procedure, its errors and its security", async (t) => {
  const h = await harness(t, { config: GATEWAY_ROUTES });
  const response = await h.app.inject({ method: "GET", url: "/v2/openapi.json" });
  t.equal(response.statusCode, 200, "no root key needed");
  const document = response.json();

  const validator = new Validator();
  const result = await validator.validate(document);
  t.same(result.errors ?? [], [], "no schema errors");
  t.ok(result.valid, "valid");
  t.equal(validator.version, "3.1");
  t.equal(document.openapi, "3.1.0");
  t.same(document.info.title, "keygate");
  t.equal(document.info.version, packageVersion());
  t.same(document.components.securitySchemes.rootKey, { type: "http", scheme: "bearer", description: "A root key of the workspace." });

  const errorCodes = v2ErrorCodes();
  const errorStatuses = [...errorCodes.keys()].sort();
  t.ok(errorStatuses.length >= 10, `${errorStatuses.length} error statuses`);
  let operations = 0;
  for (const procedure of PROCEDURES) {
    for (const name of [procedure.name, ...(procedure.aliases ?? [])]) {
      const operation = document.paths[`/v2/${name}`]?.post;
      t.ok(operation, `${name} is described`);
      if (!operation) continue;
      operations++;
      t.equal(operation.operationId, name);
      t.same(operation.tags, [name.split(".")[0]]);
      t.same(operation.security, [{ rootKey: [] }], `${name}: a root key`);
      const body = operation.requestBody?.content?.["application/json"]?.schema;
      t.same(fieldPaths(body), fieldPaths(procedure.body), `${name}: the validating body schema`);
      t.equal(body?.type, (procedure.body as { type?: string }).type);
      const answer = operation.responses["200"]?.content?.["application/json"]?.schema;
      t.same(fieldPaths(answer), fieldPaths(procedure.response), `${name}: the serialising 200 schema`);
      t.same(
        Object.keys(operation.responses)
          .filter((status) => status !== "200")
          .sort(),
        errorStatuses,
        `${name}: every error status`,
      );
      for (const [status, codes] of errorCodes) {
        const media = status === "429" || procedure.problemJsonErrors ? "application/problem+json" : "application/json";
        t.same(operation.responses[status].content, { [media]: { schema: { $ref: "#/components/schemas/ErrorEnvelope" } } });
        const named = [...operation.responses[status].description.matchAll(/`([^`]+)`/g)].map((match) => match[1]);
        t.same(named.sort(), [...codes].sort(), `${name}: ${status} names its codes, none of the gateway's`);
      }
    }
  }
  t.ok(operations >= 45, `${operations} operations, aliases included`);
  t.same(document.paths["/v2/keys.verifyKey"].post.requestBody.content["application/json"].schema.required, ["key"]);
  t.equal(document.paths["/v2/apis.createApi"].post.requestBody.content["application/json"].schema.properties.name.maxLength, 255);
  // keygate's own root-key procedures are described like Unkey's, under their own tag.
  for (const name of ["keygate.createRootKey", "keygate.listRootKeys", "keygate.deleteRootKey"]) t.ok(document.paths[`/v2/${name}`], name);
  t.same(document.paths["/v2/keygate.createRootKey"].post.requestBody.content["application/json"].schema.required, ["permissions"]);

  // The envelope the document states is the one errors are answered in, in the media type it states.
  const envelope = new Ajv({ strict: false }).compile(document.components.schemas.ErrorEnvelope);
  const invalid = await h.call("keys.verifyKey", {});
  const unauthenticated = await h.call("keys.verifyKey", { key: "k" }, { rootKey: null });
  const problem = await h.call("identities.deleteIdentity", { identity: "nobody" });
  t.same([invalid.status, unauthenticated.status, problem.status], [400, 401, 404]);
  for (const answer of [invalid, unauthenticated, problem]) t.ok(envelope(answer.body), `${answer.status} fits the envelope`);
  t.match(invalid.headers["content-type"], /^application\/json/);
  t.match(problem.headers["content-type"], /^application\/problem\+json/);
  t.notOk(envelope({ meta: {}, error: { title: "x" } }), "the envelope schema refuses an incomplete body");

  t.ok(document.paths["/v2/liveness"]?.get, "liveness is there");
  t.ok(document.paths["/v2/readiness"]?.get, "readiness is there");
  t.notOk(document.paths["/v2/liveness"].get.security, "liveness without security");
  t.notOk(document.paths["/v2/readiness"].get.security, "readiness without security");
});

t.test("neither the gateway's routes nor /metrics nor the document's own routes are in it", async (t) => {
  const h = await harness(t, { config: GATEWAY_ROUTES });
  // The gateway answers ahead of Fastify (it has no Fastify routes); /metrics is a route the document leaves out.
  t.ok(h.app.hasRoute({ method: "GET", url: "/metrics" }), "the app serves /metrics");
  const document = (await h.app.inject({ method: "GET", url: "/v2/openapi.json" })).json();
  const paths = Object.keys(document.paths);
  t.same(
    paths.filter((path) => !path.startsWith("/v2/")),
    [],
    "every path is under /v2",
  );
  for (const path of ["/", "/*", "/metrics", "/orders", "/v2/openapi.json"]) t.notOk(document.paths[path], `no ${path}`);
  t.notOk(
    paths.some((path) => path.startsWith("/v2/docs")),
    "not the reference page",
  );
});

t.test("/v2/docs: the reference page and its assets load, without a root key", async (t) => {
  const h = await harness(t);
  const page = await h.app.inject({ method: "GET", url: "/v2/docs/" });
  t.equal(page.statusCode, 200);
  t.match(page.headers["content-type"], /text\/html/);
  const assets = [...page.body.matchAll(/(?:src|href)="\.\/([^"]+)"/g)].map((match) => match[1] as string);
  t.ok(
    assets.some((asset) => asset.endsWith("swagger-ui-bundle.js")),
    "the page loads Swagger UI's bundle",
  );
  for (const asset of assets) {
    const answer = await h.app.inject({ method: "GET", url: `/v2/docs/${asset}` });
    t.equal(answer.statusCode, 200, `${asset} is served`);
    t.ok(answer.rawPayload.length > 0, `${asset} is not empty`);
  }
  t.notOk(/https?:\/\//.test(page.body), "nothing from another host");
  const initializer = await h.app.inject({ method: "GET", url: "/v2/docs/static/swagger-initializer.js" });
  t.match(initializer.body, /resolveUrl\('\.\/json'\)/, "the page reads the document from /v2/docs/json");
  const served = await h.app.inject({ method: "GET", url: "/v2/docs/json" });
  const document = await h.app.inject({ method: "GET", url: "/v2/openapi.json" });
  t.same(served.json(), document.json(), "which is /v2/openapi.json");
});
