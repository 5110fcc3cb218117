/** An entry in an audit outbox, with the outbox's handle to remove it by. */
export interface AuditOutboxItem {
  handle: string;
  /** The entry as it was appended (the audit log's JSON form of it; the outbox never reads it). */
  record: string;
}

/**
 * Where audit entries wait, durably, between the write that made them and the analytics engine (the transactional
 * outbox of docs/audit-log.md#what-survives-what): append() resolves only once the entries survive a crash of this
 * process; a pump reads them oldest first, writes them to the engine and only then removes them. An entry may thus
 * be read (and written to the engine) more than once, never lost: the engine's reads count an entry id once.
 */
export interface AuditOutbox {
  /** Appends entries in the order given; resolves once they are durable. */
  append(records: readonly string[]): Promise<void>;
  /** Up to `max` of the oldest entries not yet removed, oldest first. */
  peek(max: number): Promise<AuditOutboxItem[]>;
  /** Removes entries (by their handles) once the engine has them; handles already gone are ignored. */
  remove(handles: readonly string[]): Promise<void>;
  /** One line for the start-up banner: where the entries wait. */
  describe(): string;
}
