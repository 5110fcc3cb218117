import type { Page, PageRequest, PermissionStore } from "../interfaces.js";
import type { PermissionRecord } from "../records.js";
import { containsIgnoringCase } from "../search.js";
import { IndexedRecords } from "./indexed-records.js";

export class MemoryPermissionStore implements PermissionStore {
  private readonly permissions = new IndexedRecords<PermissionRecord>((permission) => permission.slug);

  async create(permission: PermissionRecord): Promise<boolean> {
    return this.permissions.create(permission);
  }

  async get(workspaceId: string, id: string): Promise<PermissionRecord | null> {
    return this.permissions.get(workspaceId, id);
  }

  async findBySlug(workspaceId: string, slug: string): Promise<PermissionRecord | null> {
    return this.permissions.findByUnique(workspaceId, slug);
  }

  async getMany(workspaceId: string, ids: readonly string[]): Promise<PermissionRecord[]> {
    return this.permissions.getMany(workspaceId, ids);
  }

  async findManyBySlugs(workspaceId: string, slugs: readonly string[]): Promise<Map<string, PermissionRecord>> {
    const found = new Map<string, PermissionRecord>();
    for (const slug of slugs) {
      const permission = this.permissions.findByUnique(workspaceId, slug);
      if (permission) found.set(slug, permission);
    }
    return found;
  }

  async list(workspaceId: string, page: PageRequest & { search?: string }): Promise<Page<PermissionRecord>> {
    return this.permissions.list(
      workspaceId,
      page,
      (p) => containsIgnoringCase(p.name, page.search) || containsIgnoringCase(p.slug, page.search),
    );
  }

  async delete(workspaceId: string, id: string): Promise<boolean> {
    return this.permissions.remove(workspaceId, id);
  }
}
