import type { Page, PageRequest } from "../interfaces.js";
import { SortedIds, scoped, toPage } from "./sorted-ids.js";

interface WorkspaceRecord {
  id: string;
  workspaceId: string;
}

/**
 * Records of one kind per workspace, with one unique field and the ids listed for keyset pages: the shared shape of
 * the in-memory permission, role and identity stores. Records go in and out as copies. A retired record stays
 * readable by id but leaves the unique index and the listing (a soft delete that frees its unique value).
 */
export class IndexedRecords<T extends WorkspaceRecord> {
  private readonly records = new Map<string, T>();
  private readonly idByUnique = new Map<string, string>();
  private readonly listed = new Map<string, SortedIds>();
  private readonly uniqueOf: (record: T) => string;
  private readonly retired: (record: T) => boolean;

  /** `retired` tells a record retire() has kept (e.g. a deleted identity) from a listed one. */
  constructor(uniqueOf: (record: T) => string, retired: (record: T) => boolean = () => false) {
    this.uniqueOf = uniqueOf;
    this.retired = retired;
  }

  /** False (nothing stored) when the id or the unique value is taken in the workspace. */
  create(record: T): boolean {
    const unique = scoped(record.workspaceId, this.uniqueOf(record));
    const id = scoped(record.workspaceId, record.id);
    if (this.idByUnique.has(unique) || this.records.has(id)) return false;
    this.records.set(id, structuredClone(record));
    this.idByUnique.set(unique, record.id);
    let ids = this.listed.get(record.workspaceId);
    if (!ids) {
      ids = new SortedIds();
      this.listed.set(record.workspaceId, ids);
    }
    ids.add(record.id);
    return true;
  }

  get(workspaceId: string, id: string): T | null {
    const record = this.records.get(scoped(workspaceId, id));
    return record ? structuredClone(record) : null;
  }

  findByUnique(workspaceId: string, value: string): T | null {
    const id = this.idByUnique.get(scoped(workspaceId, value));
    return id === undefined ? null : this.get(workspaceId, id);
  }

  getMany(workspaceId: string, ids: readonly string[]): T[] {
    return ids
      .map((id) => this.records.get(scoped(workspaceId, id)))
      .filter((record): record is T => record !== undefined)
      .map((record) => structuredClone(record));
  }

  list(workspaceId: string, page: PageRequest, accept: (record: T) => boolean = () => true): Page<T> {
    const ids = this.listed.get(workspaceId);
    if (!ids) return { items: [] };
    const read = (id: string) => this.records.get(scoped(workspaceId, id)) as T;
    return toPage(
      ids.page(page.cursor, page.limit, (id) => accept(read(id))),
      (id) => structuredClone(read(id)),
    );
  }

  /** Replaces a listed record (its unique value must not change); null when absent or retired. */
  replace(workspaceId: string, id: string, change: (current: T) => T): T | null {
    const current = this.records.get(scoped(workspaceId, id));
    if (!current || this.retired(current)) return null;
    const next = change(structuredClone(current));
    this.records.set(scoped(workspaceId, id), structuredClone(next));
    return structuredClone(next);
  }

  /** Deletes a record and its indexes; false when absent. */
  remove(workspaceId: string, id: string): boolean {
    const record = this.records.get(scoped(workspaceId, id));
    if (!record) return false;
    this.unindex(record);
    this.records.delete(scoped(workspaceId, id));
    return true;
  }

  /** Keeps the record as `change` makes it (retired) but drops it from the unique index and the listing; false when absent or retired. */
  retire(workspaceId: string, id: string, change: (current: T) => T): boolean {
    const record = this.records.get(scoped(workspaceId, id));
    if (!record || this.retired(record)) return false;
    this.unindex(record);
    this.records.set(scoped(workspaceId, id), change(record));
    return true;
  }

  private unindex(record: T): void {
    this.idByUnique.delete(scoped(record.workspaceId, this.uniqueOf(record)));
    this.listed.get(record.workspaceId)?.delete(record.id);
  }
}
