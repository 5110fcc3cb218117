import type { ApiStore } from "../interfaces.js";
import type { ApiRecord } from "../records.js";

export class MemoryApiStore implements ApiStore {
  private readonly apis = new Map<string, ApiRecord>();
  private readonly apiByKeySpace = new Map<string, string>();

  async create(api: ApiRecord): Promise<boolean> {
    if (this.apis.has(api.id)) return false;
    this.apis.set(api.id, structuredClone(api));
    this.apiByKeySpace.set(api.keySpaceId, api.id);
    return true;
  }

  async get(workspaceId: string, apiId: string): Promise<ApiRecord | null> {
    const api = this.apis.get(apiId);
    return api && api.workspaceId === workspaceId ? structuredClone(api) : null;
  }

  async list(workspaceId: string): Promise<ApiRecord[]> {
    return [...this.apis.values()]
      .filter((api) => api.workspaceId === workspaceId)
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      .map((api) => structuredClone(api));
  }

  async workspaceOf(apiId: string): Promise<string | null> {
    return this.apis.get(apiId)?.workspaceId ?? null;
  }

  async findByKeySpace(workspaceId: string, keySpaceId: string): Promise<ApiRecord | null> {
    const apiId = this.apiByKeySpace.get(keySpaceId);
    const api = apiId === undefined ? undefined : this.apis.get(apiId);
    return api && api.workspaceId === workspaceId ? structuredClone(api) : null;
  }

  async setIpAllowlist(workspaceId: string, apiId: string, ipAllowlist: readonly string[] | null): Promise<ApiRecord | null> {
    const api = this.apis.get(apiId);
    if (!api || api.workspaceId !== workspaceId || api.deletedAt !== undefined) return null;
    if (ipAllowlist === null) delete api.ipAllowlist;
    else api.ipAllowlist = [...ipAllowlist];
    return structuredClone(api);
  }

  async markDeleted(workspaceId: string, apiId: string, at: number): Promise<ApiRecord | null> {
    const api = this.apis.get(apiId);
    if (!api || api.workspaceId !== workspaceId || api.deletedAt !== undefined) return null;
    api.deletedAt = at;
    return structuredClone(api);
  }
}
