import type { IdentityStore, Page, PageRequest } from "../interfaces.js";
import type { IdentityRecord } from "../records.js";
import { containsIgnoringCase } from "../search.js";
import { RedisIndexedRecords } from "./indexed-records.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

/** Identities stay as records after deletion; only live ones are indexed by externalId and listed. */
export class RedisIdentityStore implements IdentityStore {
  private readonly identities: RedisIndexedRecords<IdentityRecord>;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.identities = new RedisIndexedRecords(
      redis,
      { record: keys.identity, unique: keys.liveIdentityIdByExternalId, listed: keys.liveIdentityIds },
      (identity) => identity.externalId,
      (identity) => identity.deletedAt !== undefined,
    );
  }

  create(identity: IdentityRecord): Promise<boolean> {
    return this.identities.create(identity);
  }

  get(workspaceId: string, id: string): Promise<IdentityRecord | null> {
    return this.identities.get(workspaceId, id);
  }

  findByExternalId(workspaceId: string, externalId: string): Promise<IdentityRecord | null> {
    return this.identities.findByUnique(workspaceId, externalId);
  }

  getMany(workspaceId: string, ids: readonly string[]): Promise<IdentityRecord[]> {
    return this.identities.getMany(workspaceId, ids);
  }

  list(workspaceId: string, page: PageRequest & { search?: string }): Promise<Page<IdentityRecord>> {
    return this.identities.list(workspaceId, page, (identity) => containsIgnoringCase(identity.externalId, page.search));
  }

  update(workspaceId: string, id: string, change: (identity: IdentityRecord) => IdentityRecord): Promise<IdentityRecord | null> {
    return this.identities.replace(workspaceId, id, change);
  }

  markDeleted(workspaceId: string, id: string, at: number): Promise<boolean> {
    return this.identities.retire(workspaceId, id, (identity) => ({ ...identity, deletedAt: at }));
  }
}
