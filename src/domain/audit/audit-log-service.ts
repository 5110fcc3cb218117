import { invalidInput } from "../../errors/keygate-error.js";
import { defined } from "../../lib/defined.js";
import type { Caller } from "../caller.js";
import type { Listed } from "../pagination.js";
import { requireAudit } from "../root-keys/permissions.js";
import type { AuditActorType, AuditEntry } from "./audit-trail.js";

/** What keygate.listAuditLogs may filter on; every filter given must hold. */
export interface AuditLogFilter {
  /** Unix ms, inclusive. */
  start?: number;
  end?: number;
  actorType?: AuditActorType;
  actorId?: string;
  action?: string;
  resourceType?: string;
  /** With resourceType: an entry that touched that very resource; alone, any resource with this id. */
  resourceId?: string;
}

/** One page's question to the reader: newest first, strictly before `before` when given. */
export interface AuditLogQuery extends AuditLogFilter {
  workspaceId: string;
  limit: number;
  before?: { time: number; id: string };
}

/** Where the audit log is read from: the analytics engine, or memory with analytics off. */
export interface AuditLogReader {
  /** At most `limit` entries of the workspace, newest first (time, then id, descending). */
  list(query: AuditLogQuery): Promise<AuditEntry[]>;
}

/** keygate.listAuditLogs: a workspace's audit log, confined to the caller's workspace. */
export class AuditLogService {
  private readonly reader: AuditLogReader;

  constructor(reader: AuditLogReader) {
    this.reader = reader;
  }

  async list(caller: Caller, input: AuditLogFilter & { limit: number; cursor?: string }): Promise<Listed<AuditEntry>> {
    caller.authorize(requireAudit("read_audit_logs"));
    const { limit, cursor, ...filter } = input;
    const found = await this.reader.list({
      ...filter,
      workspaceId: caller.workspaceId,
      limit: limit + 1,
      ...defined({ before: cursor === undefined ? undefined : decodeCursor(cursor) }),
    });
    const items = found.slice(0, limit);
    const last = items.at(-1);
    if (found.length <= limit || !last) return { items, pagination: { hasMore: false } };
    return { items, pagination: { cursor: encodeCursor(last), hasMore: true } };
  }
}

/** The cursor is opaque to clients: the last entry's time and id, so the next page starts strictly after it. */
function encodeCursor(entry: AuditEntry): string {
  return Buffer.from(`${entry.time}:${entry.id}`).toString("base64url");
}

function decodeCursor(cursor: string): { time: number; id: string } {
  const [time, id] = Buffer.from(cursor, "base64url").toString().split(":");
  if (time === undefined || id === undefined || !/^\d+$/.test(time) || !/^audit_\w+$/.test(id)) {
    throw invalidInput([{ location: "body.cursor", message: "is not a cursor this procedure gave" }]);
  }
  return { time: Number(time), id };
}
