import type { Page, PageRequest, RoleStore } from "../interfaces.js";
import type { RoleRecord } from "../records.js";
import { containsIgnoringCase } from "../search.js";
import { IndexedRecords } from "./indexed-records.js";

export class MemoryRoleStore implements RoleStore {
  /** Names are unique regardless of case, so the index holds the lower-cased name. */
  private readonly roles = new IndexedRecords<RoleRecord>((role) => role.name.toLowerCase());

  async create(role: RoleRecord): Promise<boolean> {
    return this.roles.create(role);
  }

  async get(workspaceId: string, id: string): Promise<RoleRecord | null> {
    return this.roles.get(workspaceId, id);
  }

  async findByName(workspaceId: string, name: string): Promise<RoleRecord | null> {
    return this.roles.findByUnique(workspaceId, name.toLowerCase());
  }

  async getMany(workspaceId: string, ids: readonly string[]): Promise<RoleRecord[]> {
    return this.roles.getMany(workspaceId, ids);
  }

  async list(workspaceId: string, page: PageRequest & { search?: string }): Promise<Page<RoleRecord>> {
    return this.roles.list(workspaceId, page, (role) => containsIgnoringCase(role.name, page.search));
  }

  async setPermissions(workspaceId: string, id: string, permissionIds: readonly string[]): Promise<RoleRecord | null> {
    return this.roles.replace(workspaceId, id, (role) => ({ ...role, permissionIds: [...permissionIds] }));
  }

  async delete(workspaceId: string, id: string): Promise<boolean> {
    return this.roles.remove(workspaceId, id);
  }
}
