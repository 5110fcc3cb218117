import t from "tap";
import { buildApp } from "../../src/app.js";
import { validateConfig } from "../../src/config/load.js";

/** keygate's app on memory stores, not yet ready: a test adds a route to it first. */
async function unreadyApp(t: { teardown(fn: () => unknown): void }) {
  const config = validateConfig({ analytics: { engine: "off" } }, "schemas test");
  const app = await buildApp(config, { logger: false });
  t.teardown(() => app.close());
  return app;
}

t.test("a request schema that does not compile fails start-up, not the route's first request", async (t) => {
  const app = await unreadyApp(t);
  app.post("/broken", { schema: { body: { type: "object", properties: { size: { type: "not-a-type" } } } } }, async () => ({}));
  await t.rejects(async () => app.ready(), { code: "FST_ERR_SCH_VALIDATION_BUILD" });
});

t.test("a response schema that does not compile fails start-up too", async (t) => {
  const app = await unreadyApp(t);
  app.post("/broken", { schema: { response: { 200: { $ref: "#/definitions/nowhere" } } } }, async () => ({}));
  await t.rejects(async () => app.ready(), { code: "FST_ERR_SCH_SERIALIZATION_BUILD" });
});

t.test("routes validate strictly and serialise through their schemas, with keygate's Ajv options", async (t) => {
  const app = await unreadyApp(t);
  app.post(
    "/sized",
    {
      schema: {
        body: {
          type: "object",
          properties: { name: { type: "string" }, size: { type: "integer", default: 3 } },
          required: ["name"],
        },
        response: { 200: { type: "object", properties: { name: { type: "string" }, size: { type: "integer" } } } },
      },
    },
    async (request) => ({ ...(request.body as object), secret: "never serialised" }),
  );
  await app.ready();

  const ok = await app.inject({ method: "POST", url: "/sized", payload: { name: "a" } });
  t.equal(ok.statusCode, 200);
  t.same(ok.json(), { name: "a", size: 3 }, "a default filled in, a field outside the response schema left out");
  const bad = await app.inject({ method: "POST", url: "/sized", payload: { name: 1, size: "4" } });
  t.equal(bad.statusCode, 400, "nothing coerced");
  t.match(bad.body, /name/);
  t.match(bad.body, /size/, "every error, not the first only");
});
