import type { PortalCodeRecord, PortalRecord, PortalSessionRecord } from "./portal-records.js";

/** A change of the portals: the whole new list, or none to change nothing, and what to answer. */
export interface PortalChange<R> {
  portals?: PortalRecord[];
  result: R;
}

/**
 * Every portal of every workspace as one list (an operator has a handful): read whole and changed whole, atomically,
 * so the rules that span portals (a slug is unique, one portal per mapping) are checked where they are written.
 */
export interface PortalStore {
  all(): Promise<PortalRecord[]>;
  /** Applies `change` to the current list (its own copy) and writes what it returns, retried if another write came between. */
  update<R>(change: (current: PortalRecord[]) => PortalChange<R>): Promise<R>;
}

/** One-time codes and the sessions they become; each expires on its own. */
export interface PortalSessionStore {
  /** Stores a code; false (and nothing changed) when one with this hash exists. */
  createCode(code: PortalCodeRecord, ttlMs: number): Promise<boolean>;
  /**
   * Redeems a code: its record, with `first` true for exactly one caller however many try at once; null when it is
   * unknown or has expired.
   */
  redeemCode(hash: string): Promise<{ code: PortalCodeRecord; first: boolean } | null>;
  /** Stores a session; false when one with this hash exists. */
  createSession(session: PortalSessionRecord, ttlMs: number): Promise<boolean>;
  getSession(hash: string): Promise<PortalSessionRecord | null>;
  deleteSession(hash: string): Promise<void>;
}
