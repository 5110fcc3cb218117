import { withRefills } from "../../lib/credit-refill.js";
import type { IdentityCreditsChange, IdentityStore, Page, PageRequest } from "../interfaces.js";
import type { CreditRecord, IdentityRecord } from "../records.js";
import { containsIgnoringCase } from "../search.js";
import { IndexedRecords } from "./indexed-records.js";
import { scoped } from "./sorted-ids.js";

/**
 * Live identities are indexed by externalId and listed; a deleted one stays readable by id (retired). Balances sit
 * beside the records, as the key store's do, for the counter store to spend without awaiting.
 */
export class MemoryIdentityStore implements IdentityStore {
  private readonly identities = new IndexedRecords<IdentityRecord>(
    (identity) => identity.externalId,
    (identity) => identity.deletedAt !== undefined,
  );
  private readonly credits = new Map<string, CreditRecord>();

  async create(identity: IdentityRecord, credits?: CreditRecord | null): Promise<boolean> {
    if (!this.identities.create(identity)) return false;
    if (credits) this.credits.set(scoped(identity.workspaceId, identity.id), structuredClone(credits));
    return true;
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

  /** The balance goes with the identity: a deleted identity pays for nothing. */
  async markDeleted(workspaceId: string, id: string, at: number): Promise<boolean> {
    if (!this.identities.retire(workspaceId, id, (identity) => ({ ...identity, deletedAt: at }))) return false;
    this.credits.delete(scoped(workspaceId, id));
    return true;
  }

  async getCredits(workspaceId: string, id: string): Promise<CreditRecord | null> {
    const credits = this.credits.get(scoped(workspaceId, id));
    return credits ? structuredClone(credits) : null;
  }

  async getCreditsMany(workspaceId: string, ids: readonly string[]): Promise<Map<string, CreditRecord>> {
    const found = new Map<string, CreditRecord>();
    for (const id of ids) {
      const credits = this.credits.get(scoped(workspaceId, id));
      if (credits) found.set(id, structuredClone(credits));
    }
    return found;
  }

  async updateCredits<R>(
    workspaceId: string,
    id: string,
    change: (identity: IdentityRecord, credits: CreditRecord | null) => IdentityCreditsChange<R>,
  ): Promise<R | null> {
    const identity = this.identities.get(workspaceId, id);
    if (!identity || identity.deletedAt !== undefined) return null;
    // No await between reading and writing: the change is atomic in Node's single thread.
    const at = scoped(workspaceId, id);
    const current = this.credits.get(at);
    const outcome = change(identity, current ? structuredClone(current) : null);
    if (outcome.credits === null) this.credits.delete(at);
    else if (outcome.credits) this.credits.set(at, structuredClone(outcome.credits));
    return outcome.result;
  }

  async refundCredits(workspaceId: string, id: string, amount: number, now: number): Promise<number | null> {
    const balance = this.readBalance(workspaceId, id);
    if (!balance) return null;
    const refilled = withRefills(balance, now);
    this.writeBalance(workspaceId, id, { ...refilled, remaining: refilled.remaining + amount });
    return refilled.remaining + amount;
  }

  /** The balance as stored, for the counter store's atomic step (no copy, no await). */
  readBalance(workspaceId: string, id: string): CreditRecord | null {
    return this.credits.get(scoped(workspaceId, id)) ?? null;
  }

  writeBalance(workspaceId: string, id: string, balance: CreditRecord): void {
    this.credits.set(scoped(workspaceId, id), balance);
  }
}
