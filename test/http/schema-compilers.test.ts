import Fastify from "fastify";
import t from "tap";
import { compilersOnFirstUse, validatorOnFirstUse } from "../../src/http/schema-compilers.js";

t.test("a validator compiles its schema on its first call, once, and shows the compiled one's errors", async (t) => {
  let compiled = 0;
  const validate = validatorOnFirstUse(() => {
    compiled++;
    // As Ajv's: the function keeps the errors of its last call on itself.
    const check = (data: unknown): boolean => {
      check.errors = typeof data === "string" ? null : [{ message: "must be string" }];
      return check.errors === null;
    };
    check.errors = null as unknown;
    return check;
  });
  t.equal(compiled, 0, "nothing compiled before the first call");
  t.equal(validate(1), false);
  t.same(validate.errors, [{ message: "must be string" }]);
  t.equal(validate("a"), true);
  t.equal(validate.errors, null);
  t.equal(compiled, 1, "compiled once");
});

t.test("routes validate and serialise as with Fastify's own compilers, the schemas compiled on first use", async (t) => {
  const app = Fastify({
    ajv: { customOptions: { coerceTypes: false, useDefaults: true, allErrors: true } },
    schemaController: { compilersFactory: compilersOnFirstUse() },
  });
  app.post(
    "/",
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
  t.teardown(() => app.close());

  const ok = await app.inject({ method: "POST", url: "/", payload: { name: "a" } });
  t.equal(ok.statusCode, 200);
  t.same(ok.json(), { name: "a", size: 3 }, "a default filled in, a field outside the response schema left out");
  const bad = await app.inject({ method: "POST", url: "/", payload: { name: 1, size: "x" } });
  t.equal(bad.statusCode, 400);
  t.match(bad.json().message, /body\/name must be string, body\/size must be integer/, "every error, as Ajv words them");
});
