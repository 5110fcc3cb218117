import type { Page, PageRequest, PermissionStore } from "../interfaces.js";
import type { PermissionRecord } from "../records.js";
import { containsIgnoringCase } from "../search.js";
import { RedisIndexedRecords } from "./indexed-records.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

export class RedisPermissionStore implements PermissionStore {
  private readonly permissions: RedisIndexedRecords<PermissionRecord>;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.permissions = new RedisIndexedRecords(
      redis,
      { record: keys.permission, unique: keys.permissionIdBySlug, listed: keys.permissionIds },
      (permission) => permission.slug,
    );
  }

  create(permission: PermissionRecord): Promise<boolean> {
    return this.permissions.create(permission);
  }

  get(workspaceId: string, id: string): Promise<PermissionRecord | null> {
    return this.permissions.get(workspaceId, id);
  }

  findBySlug(workspaceId: string, slug: string): Promise<PermissionRecord | null> {
    return this.permissions.findByUnique(workspaceId, slug);
  }

  getMany(workspaceId: string, ids: readonly string[]): Promise<PermissionRecord[]> {
    return this.permissions.getMany(workspaceId, ids);
  }

  async findManyBySlugs(workspaceId: string, slugs: readonly string[]): Promise<Map<string, PermissionRecord>> {
    const ids = await this.permissions.idsByUnique(workspaceId, slugs);
    const permissions = await this.permissions.getMany(
      workspaceId,
      ids.filter((id): id is string => id !== null),
    );
    return new Map(permissions.map((permission) => [permission.slug, permission]));
  }

  list(workspaceId: string, page: PageRequest & { search?: string }): Promise<Page<PermissionRecord>> {
    return this.permissions.list(
      workspaceId,
      page,
      (p) => containsIgnoringCase(p.name, page.search) || containsIgnoringCase(p.slug, page.search),
    );
  }

  delete(workspaceId: string, id: string): Promise<boolean> {
    return this.permissions.remove(workspaceId, id);
  }
}
