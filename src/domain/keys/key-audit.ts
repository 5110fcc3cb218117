import type { CreditRecord, KeyRecord } from "../../storage/records.js";
import type { AuditChange } from "../audit/audit-trail.js";
import { changesOf } from "../audit/audit-trail.js";
import { viewCredits } from "../credits.js";
import type { IdentityService } from "../identities/identity-service.js";
import { viewNamedLimits } from "../named-limits.js";
import type { RbacService } from "../rbac/rbac-service.js";

/** What keys.updateKey's audit entry needs to name references by their wire values. */
export interface KeyAuditDeps {
  rbac: RbacService;
  identities: IdentityService;
}

/**
 * A key's fields as the wire names them (roles by name, permissions by slug, the identity by externalId), never
 * its hash, start or encrypted secret: what an audit entry compares before and after a change.
 */
async function wireFields(deps: KeyAuditDeps, key: KeyRecord, credits: CreditRecord | null, now: number): Promise<Record<string, unknown>> {
  const workspaceId = key.workspaceId;
  const identity =
    key.identityId === undefined ? undefined : (await deps.identities.liveById(workspaceId, [key.identityId])).get(key.identityId);
  return {
    name: key.name,
    externalId: identity?.externalId,
    meta: key.meta,
    expires: key.expires,
    credits: viewCredits(credits, now),
    ratelimits: viewNamedLimits(key.ratelimits)?.map(({ id: _id, ...limit }) => limit),
    enabled: key.enabled,
    roles: (await deps.rbac.rolesById(workspaceId, key.roleIds)).map((role) => role.name),
    permissions: (await deps.rbac.permissionsById(workspaceId, key.permissionIds)).map((permission) => permission.slug),
  };
}

/** The fields keys.updateKey changed, with their old and new values. */
export async function keyChanges(
  deps: KeyAuditDeps,
  before: { key: KeyRecord; credits: CreditRecord | null },
  after: { key: KeyRecord; credits: CreditRecord | null },
  now: number,
): Promise<AuditChange[]> {
  const old = await wireFields(deps, before.key, before.credits, now);
  const updated = await wireFields(deps, after.key, after.credits, now);
  return changesOf(old, updated, Object.keys(old));
}
