import type { RatelimitNamespaceStore } from "../interfaces.js";
import type { RatelimitNamespaceRecord, RatelimitOverrideRecord } from "../records.js";

interface NamespaceEntry {
  record: RatelimitNamespaceRecord;
  /** Overrides by identifier. */
  overrides: Map<string, RatelimitOverrideRecord>;
  overridesVersion: number;
}

export class MemoryRatelimitNamespaceStore implements RatelimitNamespaceStore {
  private readonly namespaces = new Map<string, NamespaceEntry>();
  /** `workspaceId \0 name` → namespace id. */
  private readonly idByName = new Map<string, string>();

  async createNamespace(namespace: RatelimitNamespaceRecord): Promise<boolean> {
    const nameKey = `${namespace.workspaceId}\u0000${namespace.name}`;
    if (this.namespaces.has(namespace.id) || this.idByName.has(nameKey)) return false;
    this.namespaces.set(namespace.id, { record: structuredClone(namespace), overrides: new Map(), overridesVersion: 0 });
    this.idByName.set(nameKey, namespace.id);
    return true;
  }

  async getNamespace(workspaceId: string, namespaceId: string): Promise<RatelimitNamespaceRecord | null> {
    const entry = this.entry(workspaceId, namespaceId);
    return entry ? structuredClone(entry.record) : null;
  }

  async findNamespaceByName(workspaceId: string, name: string): Promise<RatelimitNamespaceRecord | null> {
    const id = this.idByName.get(`${workspaceId}\u0000${name}`);
    return id === undefined ? null : this.getNamespace(workspaceId, id);
  }

  async listNamespaces(workspaceId: string): Promise<RatelimitNamespaceRecord[]> {
    return [...this.namespaces.values()]
      .filter((entry) => entry.record.workspaceId === workspaceId)
      .map((entry) => structuredClone(entry.record))
      .sort((a, b) => compare(a.id, b.id));
  }

  async markNamespaceDeleted(workspaceId: string, namespaceId: string, at: number): Promise<RatelimitNamespaceRecord | null> {
    const entry = this.entry(workspaceId, namespaceId);
    if (!entry || entry.record.deletedAt !== undefined) return null;
    entry.record.deletedAt = at;
    return structuredClone(entry.record);
  }

  async namespaceState(
    workspaceId: string,
    namespaceId: string,
  ): Promise<{ namespace: RatelimitNamespaceRecord; overridesVersion: string } | null> {
    const entry = this.entry(workspaceId, namespaceId);
    return entry ? { namespace: structuredClone(entry.record), overridesVersion: String(entry.overridesVersion) } : null;
  }

  async setOverride(override: RatelimitOverrideRecord): Promise<RatelimitOverrideRecord> {
    const entry = this.entry(override.workspaceId, override.namespaceId);
    if (!entry) throw new Error(`setOverride: namespace '${override.namespaceId}' does not exist`);
    const existing = entry.overrides.get(override.identifier);
    const stored = existing ? { ...existing, limit: override.limit, durationMs: override.durationMs } : structuredClone(override);
    entry.overrides.set(override.identifier, stored);
    entry.overridesVersion++;
    return structuredClone(stored);
  }

  async getOverride(workspaceId: string, namespaceId: string, identifier: string): Promise<RatelimitOverrideRecord | null> {
    const override = this.entry(workspaceId, namespaceId)?.overrides.get(identifier);
    return override ? structuredClone(override) : null;
  }

  async deleteOverride(workspaceId: string, namespaceId: string, identifier: string): Promise<RatelimitOverrideRecord | null> {
    const entry = this.entry(workspaceId, namespaceId);
    const override = entry?.overrides.get(identifier);
    if (!entry || !override) return null;
    entry.overrides.delete(identifier);
    entry.overridesVersion++;
    return override;
  }

  async listOverrides(
    workspaceId: string,
    namespaceId: string,
    page: { cursor?: string; limit: number },
  ): Promise<RatelimitOverrideRecord[]> {
    const cursor = page.cursor;
    return (await this.allOverrides(workspaceId, namespaceId))
      .filter((override) => cursor === undefined || compare(override.id, cursor) >= 0)
      .sort((a, b) => compare(a.id, b.id))
      .slice(0, page.limit);
  }

  async allOverrides(workspaceId: string, namespaceId: string): Promise<RatelimitOverrideRecord[]> {
    return [...(this.entry(workspaceId, namespaceId)?.overrides.values() ?? [])].map((override) => structuredClone(override));
  }

  private entry(workspaceId: string, namespaceId: string): NamespaceEntry | undefined {
    const entry = this.namespaces.get(namespaceId);
    return entry && entry.record.workspaceId === workspaceId ? entry : undefined;
  }
}

/** Code-unit order, the order Redis sorts members of equal score in (ZRANGEBYLEX), so both stores page alike. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
