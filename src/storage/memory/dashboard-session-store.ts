import type { Clock } from "../../lib/clock.js";
import type { DashboardSessionStore } from "../interfaces.js";
import type { DashboardSessionRecord } from "../records.js";

interface Entry {
  session: DashboardSessionRecord;
  expiresAt: number;
}

/** Sessions of one process. Expired ones are dropped when read and whenever a session is created. */
export class MemoryDashboardSessionStore implements DashboardSessionStore {
  private readonly entries = new Map<string, Entry>();
  private readonly clock: Clock;

  constructor(clock: Clock) {
    this.clock = clock;
  }

  async create(session: DashboardSessionRecord, ttlMs: number): Promise<boolean> {
    const now = this.clock.now();
    for (const [id, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(id);
    if (this.entries.has(session.id)) return false;
    this.entries.set(session.id, { session: { ...session }, expiresAt: now + ttlMs });
    return true;
  }

  async get(id: string): Promise<DashboardSessionRecord | null> {
    const entry = this.entries.get(id);
    if (!entry) return null;
    if (entry.expiresAt <= this.clock.now()) {
      this.entries.delete(id);
      return null;
    }
    return { ...entry.session };
  }

  async touch(id: string, lastSeenAt: number, ttlMs: number): Promise<void> {
    const entry = this.entries.get(id);
    if (!entry || entry.expiresAt <= this.clock.now()) return;
    this.entries.set(id, { session: { ...entry.session, lastSeenAt }, expiresAt: this.clock.now() + ttlMs });
  }

  async delete(id: string): Promise<void> {
    this.entries.delete(id);
  }
}
