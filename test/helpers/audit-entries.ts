import { type AuditEntry, auditId } from "../../src/domain/audit/audit-trail.js";
import { WORKSPACE } from "./harness.js";

/** The nth of a run of api.create entries in the harness's workspace, one millisecond apart; `overrides` on top. */
export function auditEntry(n: number, overrides: Partial<AuditEntry> = {}): AuditEntry {
  return {
    id: auditId(1_000 + n),
    time: 1_000 + n,
    workspaceId: WORKSPACE,
    actor: { type: "root_key", id: "key_x", name: "" },
    action: "api.create",
    description: `entry ${n}`,
    resources: [{ type: "api", id: `api_${n}` }],
    changes: [],
    requestId: `req_${n}`,
    clientAddress: "127.0.0.1",
    userAgent: "",
    ...overrides,
  };
}
