import { defined } from "../lib/defined.js";
import type { Page } from "../storage/interfaces.js";

/** What a paginated procedure takes: a page size, where the previous page ended, and an optional search. */
export interface ListInput {
  limit: number;
  cursor?: string;
  search?: string;
}

/** What a paginated procedure answers: one page and how to ask for the next. */
export interface Listed<T> {
  items: T[];
  pagination: { cursor?: string; hasMore: boolean };
}

/** The store's page request for a procedure's input (unset fields left out). */
export function page(input: ListInput): { limit: number; cursor?: string; search?: string } {
  return { limit: input.limit, ...defined({ cursor: input.cursor, search: input.search }) };
}

/** The answer's pagination for a store's page: a cursor only when there is more. */
export function pagination<T>(found: Page<T>): { cursor?: string; hasMore: boolean } {
  return found.nextCursor === undefined ? { hasMore: false } : { cursor: found.nextCursor, hasMore: true };
}

/** A store's page as the answer shows it, each record through `view`. */
export function listed<R, V>(found: Page<R>, view: (record: R) => V): Listed<V> {
  return { items: found.items.map(view), pagination: pagination(found) };
}
