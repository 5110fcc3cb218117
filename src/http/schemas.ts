import { type Static, type TObject, type TObjectOptions, type TProperties, type TSchema, type TUnsafe, Type } from "typebox";
import { defined } from "../lib/defined.js";
import { describedPattern } from "./patterns.js";

/**
 * Schema building blocks shared by every procedure. Objects are strict (unknown fields are rejected:
 * docs/decisions.md#validation); the schema of a procedure and its TypeScript type come from the same declaration.
 */
export function Strict<P extends TProperties>(properties: P, options: TObjectOptions = {}): TObject<P> {
  return Type.Object(properties, { ...options, additionalProperties: false });
}

/**
 * `T | null` written as a JSON Schema type list rather than anyOf, so a bad value gets one clear message
 * ("must be a string or null") instead of one per branch. Only for schemas with a single `type`.
 */
export function Nullable<T extends TSchema>(schema: T): TUnsafe<Static<T> | null> {
  const type = (schema as { type?: unknown }).type;
  if (typeof type !== "string") throw new Error("Nullable() needs a schema with a single type");
  return Type.Unsafe<Static<T> | null>({ ...schema, type: [type, "null"] });
}

/**
 * One of a few strings, as a JSON Schema `enum` rather than a union of literals, so a bad value gets one message
 * ("must be one of: ...") instead of one per literal.
 */
export function StringEnum<const T extends readonly string[]>(values: T, options: { default?: T[number] } = {}): TUnsafe<T[number]> {
  return Type.Unsafe<T[number]>({ type: "string", enum: [...values], ...options });
}

/** Free-form JSON object (key meta, identity meta), at most 100 top-level fields. */
export const JsonObject = Type.Unsafe<Record<string, unknown>>({ type: "object", additionalProperties: true, maxProperties: 100 });

export const Meta = Strict({ requestId: Type.String() });

export const Pagination = Type.Object({
  cursor: Type.Optional(Type.String()),
  hasMore: Type.Boolean(),
});

export type PaginationData = Static<typeof Pagination>;

/** The success envelope around a procedure's data schema (docs/decisions.md#envelope), with `pagination` for list procedures. */
export function Envelope(data: TSchema, options: { paginated?: boolean } = {}): TSchema {
  return Type.Object({
    meta: Meta,
    data,
    ...defined({ pagination: options.paginated ? Pagination : undefined }),
  });
}

export const ErrorBody = Type.Object({
  meta: Meta,
  error: Type.Object({
    title: Type.String(),
    detail: Type.String(),
    status: Type.Integer(),
    type: Type.String(),
    errors: Type.Optional(Type.Array(Type.Object({ location: Type.String(), message: Type.String(), fix: Type.Optional(Type.String()) }))),
  }),
});

/** Identifier patterns shared by several procedures. */
export const ID_PATTERN = describedPattern("^[a-zA-Z0-9_]+$", "contain only letters, digits and _");
export const EXTERNAL_ID_PATTERN = describedPattern("^[a-zA-Z0-9_.-]+$", "contain only letters, digits, _, . and -");
export const NAME_PATTERN = describedPattern(
  "^[a-zA-Z][a-zA-Z0-9._-]*$",
  "start with a letter and contain only letters, digits, ., _ and -",
);
