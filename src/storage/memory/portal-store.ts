import type { Clock } from "../../lib/clock.js";
import type { PortalChange, PortalSessionStore, PortalStore } from "../portal-interfaces.js";
import type { PortalCodeRecord, PortalRecord, PortalSessionRecord } from "../portal-records.js";

/** The portals of one process. */
export class MemoryPortalStore implements PortalStore {
  private portals: PortalRecord[] = [];

  async all(): Promise<PortalRecord[]> {
    return structuredClone(this.portals);
  }

  async update<R>(change: (current: PortalRecord[]) => PortalChange<R>): Promise<R> {
    const next = change(structuredClone(this.portals));
    if (next.portals !== undefined) this.portals = structuredClone(next.portals);
    return next.result;
  }
}

interface Entry<T> {
  value: T;
  expiresAt: number;
}

/** Codes and sessions of one process; expired ones are dropped when read and whenever one is created. */
export class MemoryPortalSessionStore implements PortalSessionStore {
  private readonly codes = new Map<string, Entry<PortalCodeRecord>>();
  private readonly redeemed = new Set<string>();
  private readonly sessions = new Map<string, Entry<PortalSessionRecord>>();
  private readonly clock: Clock;

  constructor(clock: Clock) {
    this.clock = clock;
  }

  async createCode(code: PortalCodeRecord, ttlMs: number): Promise<boolean> {
    return this.put(this.codes, code.hash, code, ttlMs);
  }

  async redeemCode(hash: string): Promise<{ code: PortalCodeRecord; first: boolean } | null> {
    const code = this.live(this.codes, hash);
    if (!code) {
      this.redeemed.delete(hash);
      return null;
    }
    const first = !this.redeemed.has(hash);
    this.redeemed.add(hash);
    return { code, first };
  }

  async createSession(session: PortalSessionRecord, ttlMs: number): Promise<boolean> {
    return this.put(this.sessions, session.hash, session, ttlMs);
  }

  async getSession(hash: string): Promise<PortalSessionRecord | null> {
    return this.live(this.sessions, hash);
  }

  async deleteSession(hash: string): Promise<void> {
    this.sessions.delete(hash);
  }

  private put<T>(entries: Map<string, Entry<T>>, hash: string, value: T, ttlMs: number): boolean {
    const now = this.clock.now();
    for (const [id, entry] of entries)
      if (entry.expiresAt <= now) {
        entries.delete(id);
        this.redeemed.delete(id);
      }
    if (entries.has(hash)) return false;
    entries.set(hash, { value: structuredClone(value), expiresAt: now + ttlMs });
    return true;
  }

  private live<T>(entries: Map<string, Entry<T>>, hash: string): T | null {
    const entry = entries.get(hash);
    if (!entry) return null;
    if (entry.expiresAt <= this.clock.now()) {
      entries.delete(hash);
      return null;
    }
    return structuredClone(entry.value);
  }
}
