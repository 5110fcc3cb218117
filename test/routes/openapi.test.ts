import { Validator } from "@seriousme/openapi-schema-validator";
import t from "tap";
import { PROCEDURES } from "../../src/routes/v2/index.js";
import { harness } from "../helpers/harness.js";

// GET /v2/openapi.json: a valid OpenAPI 3.1 document of every procedure, generated from the validating schemas;
// /v2/docs renders it from assets served by keygate itself.

t.test("the document is valid OpenAPI 3.1 and describes every procedure, its errors and its security", async (t) => {
  const h = await harness(t, {
    config: {
      routes: [{ name: "orders", match: { prefix: "/orders" }, upstream: "http://127.0.0.1:9", apiId: "api_openapi" }],
      apis: [{ id: "api_openapi", name: "openapi", workspaceId: "ws_test" }],
    },
  });
  const response = await h.app.inject({ method: "GET", url: "/v2/openapi.json" });
  t.equal(response.statusCode, 200, "no root key needed");
  const document = response.json();

  const validator = new Validator();
  const result = await validator.validate(document);
  t.same(result.errors ?? [], [], "no schema errors");
  t.ok(result.valid, "valid");
  t.equal(validator.version, "3.1");
  t.same(document.components.securitySchemes.rootKey, { type: "http", scheme: "bearer", description: "A root key of the workspace." });

  const names = PROCEDURES.flatMap((procedure) => [procedure.name, ...(procedure.aliases ?? [])]);
  t.ok(names.length >= 40, `${names.length} procedures`);
  for (const name of names) {
    const operation = document.paths[`/v2/${name}`]?.post;
    t.ok(operation, `${name} is described`);
    if (!operation) continue;
    t.equal(operation.operationId, name);
    t.same(operation.security, [{ rootKey: [] }]);
    t.ok(operation.requestBody?.content?.["application/json"]?.schema, `${name}: its request body`);
    t.ok(operation.responses["200"]?.content?.["application/json"]?.schema, `${name}: its answer`);
    for (const status of ["400", "401", "403", "500"]) t.ok(operation.responses[status], `${name}: ${status} is listed`);
  }
  const verify = document.paths["/v2/keys.verifyKey"].post;
  t.same(verify.requestBody.content["application/json"].schema.required, ["key"], "the validating schema's constraints are there");
  t.match(verify.responses["401"].description, /err:unkey:authentication:missing/, "each status names its codes");

  t.ok(document.paths["/v2/liveness"]?.get, "liveness is there");
  t.notOk(document.paths["/v2/liveness"].get.security, "without security");
  t.ok(document.paths["/v2/readiness"]?.get, "readiness is there");
  const paths = Object.keys(document.paths);
  t.same(
    paths.filter((path) => !path.startsWith("/v2/")),
    [],
    "no gateway route or /metrics",
  );
  t.notOk(
    paths.some((path) => path.startsWith("/v2/docs") || path === "/v2/openapi.json"),
    "not the document's own routes",
  );
});

t.test("/v2/docs: the reference page and its assets load, without a root key", async (t) => {
  const h = await harness(t);
  const page = await h.app.inject({ method: "GET", url: "/v2/docs/" });
  t.equal(page.statusCode, 200);
  t.match(page.headers["content-type"], /text\/html/);
  const scripts = [...page.body.matchAll(/src="\.\/([^"]+)"/g)].map((match) => match[1] as string);
  t.ok(scripts.length > 0, "the page loads scripts");
  for (const script of scripts) {
    const asset = await h.app.inject({ method: "GET", url: `/v2/docs/${script}` });
    t.equal(asset.statusCode, 200, `${script} is served`);
  }
  t.notOk(/https?:\/\/(?!127\.0\.0\.1|localhost)[^"']*\.(js|css)/.test(page.body), "nothing from a CDN");
  const initializer = await h.app.inject({ method: "GET", url: "/v2/docs/static/swagger-initializer.js" });
  t.equal(initializer.statusCode, 200);
  t.match(initializer.body, /json/, "the page points at the document");
});
