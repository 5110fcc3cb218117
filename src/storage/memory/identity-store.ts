import type { IdentityStore, Page, PageRequest } from "../interfaces.js";
import type { IdentityRecord } from "../records.js";
import { containsIgnoringCase } from "../search.js";
import { IndexedRecords } from "./indexed-records.js";

/** Live identities are indexed by externalId and listed; a deleted one stays readable by id (retired). */
export class MemoryIdentityStore implements IdentityStore {
  private readonly identities = new IndexedRecords<IdentityRecord>(
    (identity) => identity.externalId,
    (identity) => identity.deletedAt !== undefined,
  );

  async create(identity: IdentityRecord): Promise<boolean> {
    return this.identities.create(identity);
  }

  async get(workspaceId: string, id: string): Promise<IdentityRecord | null> {
    return this.identities.get(workspaceId, id);
  }

  async findByExternalId(workspaceId: string, externalId: string): Promise<IdentityRecord | null> {
    return this.identities.findByUnique(workspaceId, externalId);
  }

  async getMany(workspaceId: string, ids: readonly string[]): Promise<IdentityRecord[]> {
    return this.identities.getMany(workspaceId, ids);
  }

  async list(workspaceId: string, page: PageRequest & { search?: string }): Promise<Page<IdentityRecord>> {
    return this.identities.list(workspaceId, page, (identity) => containsIgnoringCase(identity.externalId, page.search));
  }

  async update(workspaceId: string, id: string, change: (identity: IdentityRecord) => IdentityRecord): Promise<IdentityRecord | null> {
    return this.identities.replace(workspaceId, id, change);
  }

  async markDeleted(workspaceId: string, id: string, at: number): Promise<boolean> {
    return this.identities.retire(workspaceId, id, (identity) => ({ ...identity, deletedAt: at }));
  }
}
