import { defined } from "../../lib/defined.js";
import type { Page } from "../interfaces.js";

/** Ids kept in string order, for keyset pages like Redis's ZRANGE BYLEX over a sorted set. */
export class SortedIds {
  private readonly ids: string[] = [];

  get size(): number {
    return this.ids.length;
  }

  add(id: string): void {
    const at = this.position(id);
    if (this.ids[at] !== id) this.ids.splice(at, 0, id);
  }

  delete(id: string): void {
    const at = this.position(id);
    if (this.ids[at] === id) this.ids.splice(at, 1);
  }

  /** Up to `limit` ids >= cursor that `accept` keeps; nextCursor is the next kept id, when there is one. */
  page(cursor: string | undefined, limit: number, accept: (id: string) => boolean = () => true): { ids: string[]; nextCursor?: string } {
    const ids: string[] = [];
    for (let i = cursor === undefined ? 0 : this.position(cursor); i < this.ids.length; i++) {
      const id = this.ids[i] as string;
      if (!accept(id)) continue;
      if (ids.length === limit) return { ids, nextCursor: id };
      ids.push(id);
    }
    return { ids };
  }

  /** First index whose id is >= `id`. */
  private position(id: string): number {
    let low = 0;
    let high = this.ids.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if ((this.ids[middle] as string) < id) low = middle + 1;
      else high = middle;
    }
    return low;
  }
}

/** A page of records from a page of ids. */
export function toPage<T>(page: { ids: string[]; nextCursor?: string }, read: (id: string) => T): Page<T> {
  return { items: page.ids.map(read), ...defined({ nextCursor: page.nextCursor }) };
}

/** Map key of a record within its workspace. */
export function scoped(workspaceId: string, id: string): string {
  return `${workspaceId}\u0000${id}`;
}
