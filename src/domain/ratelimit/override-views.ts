import { KeygateError } from "../../errors/keygate-error.js";
import type { RatelimitNamespaceRecord, RatelimitOverrideRecord } from "../../storage/records.js";
import { type AuditEvent, changesOf } from "../audit/audit-trail.js";

/** An override as the ratelimit.*Override procedures show it. */
export interface OverrideView {
  overrideId: string;
  namespaceId: string;
  identifier: string;
  limit: number;
  durationMs: number;
  createdAt: number;
}

export function overrideView(override: RatelimitOverrideRecord): OverrideView {
  return {
    overrideId: override.id,
    namespaceId: override.namespaceId,
    identifier: override.identifier,
    limit: override.limit,
    durationMs: override.durationMs,
    createdAt: override.createdAt,
  };
}

export function overrideNotFound(identifier: string, namespace: string): KeygateError {
  return new KeygateError(
    "err:unkey:data:ratelimit_override_not_found",
    `There is no override for '${identifier}' in the namespace '${namespace}'.`,
  );
}

/** The audit event of an override set (before: the one it replaced, if any) or deleted (after: null). */
export function overrideChanges(
  action: "ratelimit.set_override" | "ratelimit.delete_override",
  namespace: RatelimitNamespaceRecord,
  before: RatelimitOverrideRecord | null,
  after: RatelimitOverrideRecord | null,
): AuditEvent {
  const override = (after ?? before) as RatelimitOverrideRecord;
  const fields = (record: RatelimitOverrideRecord | null) =>
    record ? { identifier: record.identifier, limit: record.limit, duration: record.durationMs } : {};
  return {
    action,
    description: `${after ? "Set" : "Deleted"} the override for '${override.identifier}' in namespace ${namespace.name}`,
    resources: [
      { type: "ratelimitNamespace", id: namespace.id },
      { type: "ratelimitOverride", id: override.id },
    ],
    changes: changesOf(fields(before), fields(after), ["identifier", "limit", "duration"]),
  };
}

export interface NamespaceTarget {
  /** Namespace name, or its `rlns_` id. */
  namespace: string;
}

/** A page of a namespace's overrides: `limit` of them, from `cursor` (an override id) on. */
export interface ListOverridesInput extends NamespaceTarget {
  cursor?: string;
  limit: number;
}

export interface OverridesPage {
  overrides: OverrideView[];
  /** The first id of the next page, when there is one. */
  cursor?: string;
  hasMore: boolean;
}
