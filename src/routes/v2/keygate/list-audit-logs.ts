import { Type } from "typebox";
import { AUDIT_ACTIONS } from "../../../domain/audit/audit-trail.js";
import { Strict } from "../../../http/schemas.js";
import { defineListProcedure } from "../procedure.js";
import { Cursor, PageLimit } from "../schemas.js";

const Id = Type.String({ minLength: 1, maxLength: 255 });
const Time = Type.Integer({ minimum: 0 });

const AuditLogEntry = Type.Object({
  auditLogId: Type.String(),
  time: Type.Integer(),
  workspaceId: Type.String(),
  actor: Type.Object({
    type: Type.Union([Type.Literal("root_key"), Type.Literal("dashboard"), Type.Literal("portal"), Type.Literal("system")]),
    id: Type.String(),
    name: Type.String(),
  }),
  action: Type.String(),
  description: Type.String(),
  resources: Type.Array(Type.Object({ type: Type.String(), id: Type.String() })),
  changes: Type.Array(Type.Object({ field: Type.String(), old: Type.Unknown(), new: Type.Unknown() })),
  context: Type.Object({ requestId: Type.String(), clientAddress: Type.String(), userAgent: Type.String() }),
});

/** The workspace's audit log, newest first (docs/audit-log.md). */
export default defineListProcedure({
  name: "keygate.listAuditLogs",
  audit: "none",
  body: Strict({
    limit: PageLimit,
    cursor: Type.Optional(Cursor),
    start: Type.Optional(Time),
    end: Type.Optional(Time),
    actorType: Type.Optional(
      Type.Union([Type.Literal("root_key"), Type.Literal("dashboard"), Type.Literal("portal"), Type.Literal("system")]),
    ),
    actorId: Type.Optional(Id),
    action: Type.Optional(Type.Union(AUDIT_ACTIONS.map((action) => Type.Literal(action)))),
    resourceType: Type.Optional(Id),
    resourceId: Type.Optional(Id),
  }),
  item: AuditLogEntry,
  handler: async ({ body, caller, services }) => {
    const { items, pagination } = await services.auditLog.list(caller, body);
    return {
      items: items.map((entry) => ({
        auditLogId: entry.id,
        time: entry.time,
        workspaceId: entry.workspaceId,
        actor: entry.actor,
        action: entry.action,
        description: entry.description,
        resources: entry.resources,
        changes: entry.changes,
        context: { requestId: entry.requestId, clientAddress: entry.clientAddress, userAgent: entry.userAgent },
      })),
      pagination,
    };
  },
});
