import type { Clock } from "../../lib/clock.js";
import type { KeyStore } from "../../storage/interfaces.js";
import type { KeyRecord } from "../../storage/records.js";
import { type AuditAction, type AuditTrail, UNAUDITED } from "../audit/audit-trail.js";
import type { Caller } from "../caller.js";
import type { IdentityService } from "../identities/identity-service.js";
import type { CacheInvalidator } from "../invalidation.js";
import type { NoticeSink } from "../notices.js";
import { allOf } from "../permissions/query.js";
import type { PermissionView, RbacService, RoleView } from "../rbac/rbac-service.js";
import { requireApi, requireRbac } from "../root-keys/permissions.js";
import { postKeyNotice } from "./key-notices.js";
import { keyNotFound, type LiveKeys } from "./live-keys.js";

export interface KeyAccessDeps {
  keys: KeyStore;
  live: LiveKeys;
  rbac: RbacService;
  invalidator: CacheInvalidator;
  clock: Clock;
  audit?: AuditTrail;
  /** Where key.updated is posted when a key's permissions or roles change (webhooks), and who names its identity. */
  notices?: NoticeSink;
  identities: IdentityService;
}

/** keys.add/remove/setPermissions and keys.add/remove/setRoles: what a key may do, granted directly or by role. */
export class KeyAccessService {
  private readonly deps: KeyAccessDeps;

  constructor(deps: KeyAccessDeps) {
    this.deps = deps;
  }

  async addPermissions(caller: Caller, input: { keyId: string; permissions: string[] }): Promise<PermissionView[]> {
    const key = await this.deps.live.find(caller.workspaceId, input.keyId);
    caller.authorize(allOf(requireApi("update_key", key.apiId), requireRbac("add_permission_to_key")));
    const added = await this.deps.rbac.permissionsForSlugs(caller.workspaceId, input.permissions, caller);
    return this.changeDirectPermissions(caller, key, "authorization.connect_permission_and_key", (ids) => [
      ...new Set([...ids, ...added.map((p) => p.id)]),
    ]);
  }

  async removePermissions(caller: Caller, input: { keyId: string; permissions: string[] }): Promise<PermissionView[]> {
    const key = await this.deps.live.find(caller.workspaceId, input.keyId);
    caller.authorize(allOf(requireApi("update_key", key.apiId), requireRbac("remove_permission_from_key")));
    const removed = new Set((await this.deps.rbac.existingPermissions(caller.workspaceId, input.permissions)).map((p) => p.id));
    return this.changeDirectPermissions(caller, key, "authorization.disconnect_permission_and_key", (ids) =>
      ids.filter((id) => !removed.has(id)),
    );
  }

  async setPermissions(caller: Caller, input: { keyId: string; permissions: string[] }): Promise<PermissionView[]> {
    const key = await this.deps.live.find(caller.workspaceId, input.keyId);
    caller.authorize(
      allOf(requireApi("update_key", key.apiId), requireRbac("add_permission_to_key"), requireRbac("remove_permission_from_key")),
    );
    const permissions = await this.deps.rbac.permissionsForSlugs(caller.workspaceId, input.permissions, caller);
    return this.changeDirectPermissions(caller, key, "key.update", () => permissions.map((p) => p.id));
  }

  async addRoles(caller: Caller, input: { keyId: string; roles: string[] }): Promise<RoleView[]> {
    const key = await this.deps.live.find(caller.workspaceId, input.keyId);
    caller.authorize(allOf(requireApi("update_key", key.apiId), requireRbac("add_role_to_key")));
    const added = await this.deps.rbac.existingRoles(caller.workspaceId, input.roles);
    return this.changeRoles(caller, key, "authorization.connect_role_and_key", (ids) => [...new Set([...ids, ...added.map((r) => r.id)])]);
  }

  async removeRoles(caller: Caller, input: { keyId: string; roles: string[] }): Promise<RoleView[]> {
    const key = await this.deps.live.find(caller.workspaceId, input.keyId);
    caller.authorize(requireApi("update_key", key.apiId));
    const removed = new Set((await this.deps.rbac.existingRoles(caller.workspaceId, input.roles)).map((r) => r.id));
    return this.changeRoles(caller, key, "authorization.disconnect_role_and_key", (ids) => ids.filter((id) => !removed.has(id)));
  }

  async setRoles(caller: Caller, input: { keyId: string; roles: string[] }): Promise<RoleView[]> {
    const key = await this.deps.live.find(caller.workspaceId, input.keyId);
    caller.authorize(requireApi("update_key", key.apiId));
    const roles = await this.deps.rbac.existingRoles(caller.workspaceId, input.roles);
    return this.changeRoles(caller, key, "key.update", () => roles.map((r) => r.id));
  }

  /** Replaces one of a live key's id lists (direct permissions or roles) atomically; answers the list before and after. */
  private async changeIdList(
    workspaceId: string,
    key: KeyRecord,
    field: "permissionIds" | "roleIds",
    change: (ids: string[]) => string[],
  ): Promise<{ before: string[]; after: string[] }> {
    const now = this.deps.clock.now();
    const ids = await this.deps.keys.update(workspaceId, key.id, (current) => {
      if (current.deletedAt !== undefined) return { result: null };
      const next = change(current[field]);
      return { key: { ...current, [field]: next, updatedAt: now }, result: { before: current[field], after: next } };
    });
    if (!ids) throw keyNotFound(key.id);
    await this.deps.invalidator.keyChanged(workspaceId, key.hash);
    await postKeyNotice(this.deps, "key.updated", key);
    return ids;
  }

  private async changeDirectPermissions(
    caller: Caller,
    key: KeyRecord,
    action: AuditAction,
    change: (ids: string[]) => string[],
  ): Promise<PermissionView[]> {
    const { before, after } = await this.changeIdList(caller.workspaceId, key, "permissionIds", change);
    const slugs = async (ids: string[]) => (await this.deps.rbac.permissionsById(caller.workspaceId, ids)).map((p) => p.slug);
    const [old, now] = [await slugs(before), await slugs(after)];
    this.audited(caller, key, action, "permissions", old, now, "permission", [...new Set([...before, ...after])]);
    return this.deps.rbac.viewPermissionsById(caller.workspaceId, after);
  }

  private async changeRoles(caller: Caller, key: KeyRecord, action: AuditAction, change: (ids: string[]) => string[]): Promise<RoleView[]> {
    const { before, after } = await this.changeIdList(caller.workspaceId, key, "roleIds", change);
    const names = async (ids: string[]) => (await this.deps.rbac.rolesById(caller.workspaceId, ids)).map((r) => r.name);
    this.audited(caller, key, action, "roles", await names(before), await names(after), "role", [...new Set([...before, ...after])]);
    return this.deps.rbac.viewRoles(caller.workspaceId, await this.deps.rbac.rolesById(caller.workspaceId, after));
  }

  private audited(
    caller: Caller,
    key: KeyRecord,
    action: AuditAction,
    field: "permissions" | "roles",
    old: string[],
    now: string[],
    type: "permission" | "role",
    ids: string[],
  ): void {
    (this.deps.audit ?? UNAUDITED).record(caller, {
      action,
      description: `Changed the ${field} of key ${key.id}`,
      resources: [{ type: "key", id: key.id }, { type: "api", id: key.apiId }, ...ids.map((id) => ({ type, id }))],
      changes: [{ field, old, new: now }],
    });
  }
}
