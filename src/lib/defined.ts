/** The fields of `T` that may be undefined, made optional instead, the way records and answers carry them. */
export type Defined<T extends object> = { [K in keyof T]?: Exclude<T[K], undefined> };

/**
 * `fields` without the ones whose value is undefined. Records and answers leave an unset field out rather than
 * carry `undefined` (a stored JSON record, a structured clone and a response all see the same object), so a place
 * that builds one from optional inputs writes `{ id, ...defined({ name: input.name, meta: input.meta }) }`; on the
 * request path, where a spread costs microseconds, it assigns each optional field instead (the rule and the paths:
 * docs/architecture.md#conventions). Returns a new object; `fields` is not changed.
 */
export function defined<T extends object>(fields: T): Defined<T> {
  const result: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(fields)) if (value !== undefined) result[name] = value;
  return result as Defined<T>;
}
