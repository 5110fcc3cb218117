import type { IdentityCreditsChange, IdentityStore, Page, PageRequest } from "../interfaces.js";
import type { CreditRecord, IdentityRecord } from "../records.js";
import { containsIgnoringCase } from "../search.js";
import { Batch } from "./atomic.js";
import { RedisIndexedRecords } from "./indexed-records.js";
import type { RedisKeys } from "./keys.js";
import type { RedisClient } from "./topology.js";

const MAX_ATTEMPTS = 50;

/**
 * Identities stay as records after deletion; only live ones are indexed by externalId and listed. An identity's
 * credit balance is a JSON record of its own, as a key's is: the verification script spends it without touching
 * the identity.
 */
export class RedisIdentityStore implements IdentityStore {
  private readonly redis: RedisClient;
  private readonly keys: RedisKeys;
  private readonly identities: RedisIndexedRecords<IdentityRecord>;

  constructor(redis: RedisClient, keys: RedisKeys) {
    this.redis = redis;
    this.keys = keys;
    this.identities = new RedisIndexedRecords(
      redis,
      { record: keys.identity, unique: keys.liveIdentityIdByExternalId, listed: keys.liveIdentityIds },
      (identity) => identity.externalId,
      (identity) => identity.deletedAt !== undefined,
    );
  }

  create(identity: IdentityRecord, credits?: CreditRecord | null): Promise<boolean> {
    if (!credits) return this.identities.create(identity);
    return this.identities.create(identity, (batch) =>
      batch.set(this.keys.identityCredits(identity.workspaceId, identity.id), JSON.stringify(credits)),
    );
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

  /** The balance goes with the identity, in the same step: a deleted identity pays for nothing. */
  markDeleted(workspaceId: string, id: string, at: number): Promise<boolean> {
    return this.identities.retire(
      workspaceId,
      id,
      (identity) => ({ ...identity, deletedAt: at }),
      (batch) => batch.del(this.keys.identityCredits(workspaceId, id)),
    );
  }

  async getCredits(workspaceId: string, id: string): Promise<CreditRecord | null> {
    const raw = await this.redis.get(this.keys.identityCredits(workspaceId, id));
    return raw ? (JSON.parse(raw) as CreditRecord) : null;
  }

  async getCreditsMany(workspaceId: string, ids: readonly string[]): Promise<Map<string, CreditRecord>> {
    const found = new Map<string, CreditRecord>();
    if (ids.length === 0) return found;
    const raws = await this.redis.mget(ids.map((id) => this.keys.identityCredits(workspaceId, id)));
    ids.forEach((id, i) => {
      const raw = raws[i];
      if (raw) found.set(id, JSON.parse(raw) as CreditRecord);
    });
    return found;
  }

  async updateCredits<R>(
    workspaceId: string,
    id: string,
    change: (identity: IdentityRecord, credits: CreditRecord | null) => IdentityCreditsChange<R>,
  ): Promise<R | null> {
    const identityKey = this.keys.identity(workspaceId, id);
    const creditsKey = this.keys.identityCredits(workspaceId, id);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const [rawIdentity, rawCredits] = await this.redis.mget(identityKey, creditsKey);
      if (!rawIdentity) return null;
      const identity = JSON.parse(rawIdentity) as IdentityRecord;
      if (identity.deletedAt !== undefined) return null;
      const outcome = change(identity, rawCredits ? (JSON.parse(rawCredits) as CreditRecord) : null);
      if (outcome.credits === undefined) return outcome.result;
      // Both guarded: a deletion of the identity, or a spend of the balance, in between makes this read again.
      const batch = new Batch().equals(identityKey, rawIdentity);
      if (rawCredits) batch.equals(creditsKey, rawCredits);
      else batch.absent(creditsKey);
      if (outcome.credits === null) batch.del(creditsKey);
      else batch.set(creditsKey, JSON.stringify(outcome.credits));
      if (await batch.apply(this.redis)) return outcome.result;
    }
    throw new Error(`gave up updating the credits of identity ${id}: other writers kept changing them`);
  }

  async refundCredits(workspaceId: string, id: string, amount: number, now: number): Promise<number | null> {
    const balance = await this.redis.keygateRefundCredits(1, this.keys.identityCredits(workspaceId, id), String(amount), String(now));
    return balance === "" ? null : Number(balance);
  }
}
