import AjvCompiler from "@fastify/ajv-compiler";
import SerializerSelector from "@fastify/fast-json-stringify-compiler";
import type { FastifyServerOptions } from "fastify";

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions["schemaController"]>["compilersFactory"]>;

/** Fastify's compiler factories, as they run: the shared schemas and options in, a compiler of one route's schema out. */
type Builder<F> = (externalSchemas: unknown, options: unknown) => (route: unknown) => F;

/** What Fastify calls to validate a part of a request; it reads `errors` after a false answer. */
type Validate = ((data: unknown, context?: unknown) => unknown) & { errors?: unknown; schemaEnv?: unknown };

/**
 * Fastify's own compilers (Ajv with the server's `ajv` options, fast-json-stringify), each schema compiled when a
 * request first needs it rather than when its route is registered: a server compiles only the schemas of the
 * procedures it serves, and starts without generating code for every one of them. A schema that does not compile
 * fails its route's first request (a 500) instead of start-up; the tests exercise every route.
 */
export function compilersOnFirstUse(): CompilersFactory {
  const buildValidator = AjvCompiler() as unknown as Builder<Validate>;
  const buildSerializer = SerializerSelector() as unknown as Builder<(data: unknown) => string>;
  const factory: Record<"buildValidator" | "buildSerializer", Builder<unknown>> = {
    buildValidator: (externalSchemas, options) => {
      const compile = buildValidator(externalSchemas, options);
      return (route) => validatorOnFirstUse(() => compile(route));
    },
    buildSerializer: (externalSchemas, options) => {
      const compile = buildSerializer(externalSchemas, options);
      return (route) => {
        let serialize: ((data: unknown) => string) | undefined;
        return (data: unknown) => {
          serialize ??= compile(route);
          return serialize(data);
        };
      };
    },
  };
  return factory as CompilersFactory;
}

/** A validator that compiles its schema on its first call; it answers, and shows its errors, as the compiled one. */
export function validatorOnFirstUse(compile: () => Validate): Validate {
  let validate: Validate | undefined;
  const compiled = () => {
    validate ??= compile();
    return validate;
  };
  const lazy: Validate = (data, context) => {
    const current = compiled();
    const valid = current(data, context);
    lazy.errors = current.errors;
    return valid;
  };
  // Fastify hands an Ajv validator (one with a schemaEnv) the request as the data's parent, so that Ajv may replace
  // a root value; it first asks at the first request, which compiles the schema.
  Object.defineProperty(lazy, "schemaEnv", { get: () => compiled().schemaEnv });
  return lazy;
}
