import type { Page, PageRequest, RoleStore } from "../interfaces.js";
import type { RoleRecord } from "../records.js";
import { containsIgnoringCase } from "../search.js";
import { RedisIndexedRecords } from "./indexed-records.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

export class RedisRoleStore implements RoleStore {
  /** The name index lower-cases names (keys.roleIdByName): names are unique regardless of case. */
  private readonly roles: RedisIndexedRecords<RoleRecord>;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.roles = new RedisIndexedRecords(
      redis,
      { record: keys.role, unique: keys.roleIdByName, listed: keys.roleIds },
      (role) => role.name,
    );
  }

  create(role: RoleRecord): Promise<boolean> {
    return this.roles.create(role);
  }

  get(workspaceId: string, id: string): Promise<RoleRecord | null> {
    return this.roles.get(workspaceId, id);
  }

  findByName(workspaceId: string, name: string): Promise<RoleRecord | null> {
    return this.roles.findByUnique(workspaceId, name);
  }

  getMany(workspaceId: string, ids: readonly string[]): Promise<RoleRecord[]> {
    return this.roles.getMany(workspaceId, ids);
  }

  list(workspaceId: string, page: PageRequest & { search?: string }): Promise<Page<RoleRecord>> {
    return this.roles.list(workspaceId, page, (role) => containsIgnoringCase(role.name, page.search));
  }

  setPermissions(workspaceId: string, id: string, permissionIds: readonly string[]): Promise<RoleRecord | null> {
    return this.roles.replace(workspaceId, id, (role) => ({ ...role, permissionIds: [...permissionIds] }));
  }

  delete(workspaceId: string, id: string): Promise<boolean> {
    return this.roles.remove(workspaceId, id);
  }
}
