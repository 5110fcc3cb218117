import { withRefills } from "../../lib/credit-refill.js";
import type { KeyChange, KeyStore, Page, PageRequest } from "../interfaces.js";
import type { CreditRecord, KeyRecord } from "../records.js";
import type { BalanceHolder } from "./ratelimit-counter-store.js";
import { SortedIds, scoped, toPage } from "./sorted-ids.js";

export class MemoryKeyStore implements KeyStore, BalanceHolder {
  private readonly keys = new Map<string, KeyRecord>();
  private readonly credits = new Map<string, CreditRecord>();
  private readonly idByHash = new Map<string, string>();
  /** Live key ids per API, and per API and identity (for listKeys' externalId filter). */
  private readonly liveByApi = new Map<string, SortedIds>();
  private readonly liveByIdentity = new Map<string, SortedIds>();

  async create(key: KeyRecord, credits: CreditRecord | null): Promise<boolean> {
    const id = scoped(key.workspaceId, key.id);
    const hash = scoped(key.workspaceId, key.hash);
    if (this.keys.has(id) || this.idByHash.has(hash)) return false;
    this.keys.set(id, structuredClone(key));
    if (credits) this.credits.set(id, structuredClone(credits));
    this.idByHash.set(hash, key.id);
    this.index(undefined, key);
    return true;
  }

  async get(workspaceId: string, keyId: string): Promise<KeyRecord | null> {
    const key = this.keys.get(scoped(workspaceId, keyId));
    return key ? structuredClone(key) : null;
  }

  async findByHash(workspaceId: string, hash: string): Promise<KeyRecord | null> {
    const id = this.idByHash.get(scoped(workspaceId, hash));
    return id === undefined ? null : this.get(workspaceId, id);
  }

  async getCredits(workspaceId: string, keyId: string): Promise<CreditRecord | null> {
    const credits = this.credits.get(scoped(workspaceId, keyId));
    return credits ? structuredClone(credits) : null;
  }

  async getCreditsMany(workspaceId: string, keyIds: readonly string[]): Promise<Map<string, CreditRecord>> {
    const found = new Map<string, CreditRecord>();
    for (const keyId of keyIds) {
      const credits = this.credits.get(scoped(workspaceId, keyId));
      if (credits) found.set(keyId, structuredClone(credits));
    }
    return found;
  }

  async update<R>(
    workspaceId: string,
    keyId: string,
    change: (key: KeyRecord, credits: CreditRecord | null) => KeyChange<R>,
  ): Promise<R | null> {
    const id = scoped(workspaceId, keyId);
    const current = this.keys.get(id);
    if (!current) return null;
    // No await between reading and writing: the change is atomic in Node's single thread.
    const credits = this.credits.get(id);
    const outcome = change(structuredClone(current), credits ? structuredClone(credits) : null);
    if (outcome.key) {
      this.keys.set(id, structuredClone(outcome.key));
      this.index(current, outcome.key);
    }
    if (outcome.credits === null) this.credits.delete(id);
    else if (outcome.credits) this.credits.set(id, structuredClone(outcome.credits));
    return outcome.result;
  }

  async refundCredits(workspaceId: string, keyId: string, amount: number, now: number): Promise<number | null> {
    const id = scoped(workspaceId, keyId);
    const balance = this.credits.get(id);
    if (!balance) return null;
    const refilled = withRefills(balance, now);
    this.credits.set(id, { ...refilled, remaining: refilled.remaining + amount });
    return refilled.remaining + amount;
  }

  /** The balance as stored, for the counter store's atomic step (no copy, no await). */
  readBalance(workspaceId: string, keyId: string): CreditRecord | null {
    return this.credits.get(scoped(workspaceId, keyId)) ?? null;
  }

  writeBalance(workspaceId: string, keyId: string, balance: CreditRecord): void {
    this.credits.set(scoped(workspaceId, keyId), balance);
  }

  async completeMigration(
    workspaceId: string,
    keyId: string,
    migrationId: string,
    hash: string,
    start: string,
    at: number,
  ): Promise<KeyRecord | null> {
    const id = scoped(workspaceId, keyId);
    const current = this.keys.get(id);
    const newHash = scoped(workspaceId, hash);
    if (!current || current.pendingMigrationId !== migrationId || this.idByHash.has(newHash)) return null;
    const { pendingMigrationId: _settled, ...rest } = current;
    const next: KeyRecord = { ...rest, hash, start, updatedAt: at };
    this.keys.set(id, next);
    this.idByHash.delete(scoped(workspaceId, current.hash));
    this.idByHash.set(newHash, keyId);
    return structuredClone(next);
  }

  async list(workspaceId: string, apiId: string, page: PageRequest & { identityId?: string }): Promise<Page<KeyRecord>> {
    const index =
      page.identityId === undefined
        ? this.liveByApi.get(scoped(workspaceId, apiId))
        : this.liveByIdentity.get(identityIndex(workspaceId, apiId, page.identityId));
    if (!index) return { items: [] };
    return toPage(index.page(page.cursor, page.limit), (id) => structuredClone(this.keys.get(scoped(workspaceId, id)) as KeyRecord));
  }

  async remove(workspaceId: string, keyId: string): Promise<boolean> {
    const id = scoped(workspaceId, keyId);
    const key = this.keys.get(id);
    if (!key) return false;
    this.index(key, undefined);
    this.keys.delete(id);
    this.credits.delete(id);
    this.idByHash.delete(scoped(workspaceId, key.hash));
    return true;
  }

  /** In memory there is only the current form. */
  async upgradeStorage(): Promise<number> {
    return 0;
  }

  /** Moves a key between the live-key indexes as it goes from `before` to `after` (undefined: not there). */
  private index(before: KeyRecord | undefined, after: KeyRecord | undefined): void {
    const live = (key: KeyRecord | undefined) => key !== undefined && key.deletedAt === undefined;
    if (before && live(before)) {
      this.liveByApi.get(scoped(before.workspaceId, before.apiId))?.delete(before.id);
      if (before.identityId) this.liveByIdentity.get(identityIndex(before.workspaceId, before.apiId, before.identityId))?.delete(before.id);
    }
    if (after && live(after)) {
      ensure(this.liveByApi, scoped(after.workspaceId, after.apiId)).add(after.id);
      if (after.identityId) ensure(this.liveByIdentity, identityIndex(after.workspaceId, after.apiId, after.identityId)).add(after.id);
    }
  }
}

function identityIndex(workspaceId: string, apiId: string, identityId: string): string {
  return `${workspaceId}\u0000${apiId}\u0000${identityId}`;
}

function ensure(map: Map<string, SortedIds>, key: string): SortedIds {
  let ids = map.get(key);
  if (!ids) {
    ids = new SortedIds();
    map.set(key, ids);
  }
  return ids;
}
