import type { Clock } from "../../lib/clock.js";
import type { KeyStore } from "../../storage/interfaces.js";
import type { KeyRecord } from "../../storage/records.js";
import type { Caller } from "../caller.js";
import type { CacheInvalidator } from "../invalidation.js";
import { allOf } from "../permissions/query.js";
import type { PermissionView, RbacService, RoleView } from "../rbac/rbac-service.js";
import { requireApi, requireRbac } from "../root-keys/permissions.js";
import { keyNotFound, type LiveKeys } from "./live-keys.js";

export interface KeyAccessDeps {
  keys: KeyStore;
  live: LiveKeys;
  rbac: RbacService;
  invalidator: CacheInvalidator;
  clock: Clock;
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
    return this.changeDirectPermissions(caller.workspaceId, key, (ids) => [...new Set([...ids, ...added.map((p) => p.id)])]);
  }

  async removePermissions(caller: Caller, input: { keyId: string; permissions: string[] }): Promise<PermissionView[]> {
    const key = await this.deps.live.find(caller.workspaceId, input.keyId);
    caller.authorize(allOf(requireApi("update_key", key.apiId), requireRbac("remove_permission_from_key")));
    const removed = new Set((await this.deps.rbac.existingPermissions(caller.workspaceId, input.permissions)).map((p) => p.id));
    return this.changeDirectPermissions(caller.workspaceId, key, (ids) => ids.filter((id) => !removed.has(id)));
  }

  async setPermissions(caller: Caller, input: { keyId: string; permissions: string[] }): Promise<PermissionView[]> {
    const key = await this.deps.live.find(caller.workspaceId, input.keyId);
    caller.authorize(
      allOf(requireApi("update_key", key.apiId), requireRbac("add_permission_to_key"), requireRbac("remove_permission_from_key")),
    );
    const permissions = await this.deps.rbac.permissionsForSlugs(caller.workspaceId, input.permissions, caller);
    return this.changeDirectPermissions(caller.workspaceId, key, () => permissions.map((p) => p.id));
  }

  async addRoles(caller: Caller, input: { keyId: string; roles: string[] }): Promise<RoleView[]> {
    const key = await this.deps.live.find(caller.workspaceId, input.keyId);
    caller.authorize(allOf(requireApi("update_key", key.apiId), requireRbac("add_role_to_key")));
    const added = await this.deps.rbac.existingRoles(caller.workspaceId, input.roles);
    return this.changeRoles(caller.workspaceId, key, (ids) => [...new Set([...ids, ...added.map((r) => r.id)])]);
  }

  async removeRoles(caller: Caller, input: { keyId: string; roles: string[] }): Promise<RoleView[]> {
    const key = await this.deps.live.find(caller.workspaceId, input.keyId);
    caller.authorize(requireApi("update_key", key.apiId));
    const removed = new Set((await this.deps.rbac.existingRoles(caller.workspaceId, input.roles)).map((r) => r.id));
    return this.changeRoles(caller.workspaceId, key, (ids) => ids.filter((id) => !removed.has(id)));
  }

  async setRoles(caller: Caller, input: { keyId: string; roles: string[] }): Promise<RoleView[]> {
    const key = await this.deps.live.find(caller.workspaceId, input.keyId);
    caller.authorize(requireApi("update_key", key.apiId));
    const roles = await this.deps.rbac.existingRoles(caller.workspaceId, input.roles);
    return this.changeRoles(caller.workspaceId, key, () => roles.map((r) => r.id));
  }

  /** Replaces one of a live key's id lists (direct permissions or roles) atomically; answers the new list. */
  private async changeIdList(
    workspaceId: string,
    key: KeyRecord,
    field: "permissionIds" | "roleIds",
    change: (ids: string[]) => string[],
  ): Promise<string[]> {
    const now = this.deps.clock.now();
    const ids = await this.deps.keys.update(workspaceId, key.id, (current) => {
      if (current.deletedAt !== undefined) return { result: null };
      const next = change(current[field]);
      return { key: { ...current, [field]: next, updatedAt: now }, result: next };
    });
    if (!ids) throw keyNotFound(key.id);
    await this.deps.invalidator.keyChanged(workspaceId, key.hash);
    return ids;
  }

  private async changeDirectPermissions(
    workspaceId: string,
    key: KeyRecord,
    change: (ids: string[]) => string[],
  ): Promise<PermissionView[]> {
    return this.deps.rbac.viewPermissionsById(workspaceId, await this.changeIdList(workspaceId, key, "permissionIds", change));
  }

  private async changeRoles(workspaceId: string, key: KeyRecord, change: (ids: string[]) => string[]): Promise<RoleView[]> {
    const ids = await this.changeIdList(workspaceId, key, "roleIds", change);
    return this.deps.rbac.viewRoles(workspaceId, await this.deps.rbac.rolesById(workspaceId, ids));
  }
}
