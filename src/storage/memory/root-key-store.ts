import type { RootKeyStore } from "../interfaces.js";
import type { RootKeyRecord } from "../records.js";

export class MemoryRootKeyStore implements RootKeyStore {
  private readonly byHash = new Map<string, RootKeyRecord>();
  private readonly hashById = new Map<string, string>();

  async findByHash(hash: string): Promise<RootKeyRecord | null> {
    const record = this.byHash.get(hash);
    return record ? structuredClone(record) : null;
  }

  async create(record: RootKeyRecord): Promise<boolean> {
    if (this.byHash.has(record.hash) || this.hashById.has(record.id)) return false;
    this.byHash.set(record.hash, structuredClone(record));
    this.hashById.set(record.id, record.hash);
    return true;
  }

  async list(workspaceId?: string): Promise<RootKeyRecord[]> {
    return [...this.hashById.keys()]
      .sort()
      .map((id) => this.byHash.get(this.hashById.get(id) as string) as RootKeyRecord)
      .filter((record) => workspaceId === undefined || record.workspaceId === workspaceId)
      .map((record) => structuredClone(record));
  }

  async revoke(id: string, at: number): Promise<RootKeyRecord | null> {
    const hash = this.hashById.get(id);
    const record = hash === undefined ? undefined : this.byHash.get(hash);
    if (!record || record.revokedAt !== undefined) return null;
    record.revokedAt = at;
    return structuredClone(record);
  }
}
