import { KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { defined } from "../../lib/defined.js";
import { newId } from "../../lib/ids.js";
import type { PermissionStore, RoleStore } from "../../storage/interfaces.js";
import type { PermissionRecord, RoleRecord } from "../../storage/records.js";
import { type AuditTrail, created, UNAUDITED } from "../audit/audit-trail.js";
import type { Caller } from "../caller.js";
import type { CacheInvalidator } from "../invalidation.js";
import { type Listed, type ListInput, listed, page, pagination } from "../pagination.js";
import { allOf } from "../permissions/query.js";
import { requireRbac } from "../root-keys/permissions.js";

export interface PermissionView {
  id: string;
  name: string;
  slug: string;
  description?: string;
}

export interface RoleView {
  id: string;
  name: string;
  description?: string;
  permissions?: PermissionView[];
}

/** Permissions and roles: the RBAC objects that end-user keys hold and permission queries name. */
export class RbacService {
  private readonly permissions: PermissionStore;
  private readonly roles: RoleStore;
  private readonly invalidator: CacheInvalidator;
  private readonly clock: Clock;
  private readonly audit: AuditTrail;

  constructor(permissions: PermissionStore, roles: RoleStore, invalidator: CacheInvalidator, clock: Clock, audit: AuditTrail = UNAUDITED) {
    this.permissions = permissions;
    this.roles = roles;
    this.invalidator = invalidator;
    this.clock = clock;
    this.audit = audit;
  }

  async createPermission(caller: Caller, input: { name: string; slug: string; description?: string }): Promise<{ permissionId: string }> {
    caller.authorize(requireRbac("create_permission"));
    const permission: PermissionRecord = {
      id: newId("perm", this.clock.now()),
      workspaceId: caller.workspaceId,
      name: input.name,
      slug: input.slug,
      ...defined({ description: input.description }),
      createdAt: this.clock.now(),
    };
    if (!(await this.permissions.create(permission))) {
      throw new KeygateError("err:unkey:data:permission_already_exists", `A permission with the slug '${input.slug}' already exists.`);
    }
    this.audit.record(caller, {
      action: "permission.create",
      description: `Created permission ${permission.id} (${permission.slug})`,
      resources: [{ type: "permission", id: permission.id }],
      changes: created({ name: permission.name, slug: permission.slug, description: permission.description }),
    });
    return { permissionId: permission.id };
  }

  async getPermission(caller: Caller, input: { permission: string }): Promise<PermissionView> {
    caller.authorize(requireRbac("read_permission"));
    return viewPermission(await this.findPermission(caller.workspaceId, input.permission));
  }

  async listPermissions(caller: Caller, input: ListInput): Promise<Listed<PermissionView>> {
    caller.authorize(requireRbac("read_permission"));
    return listed(await this.permissions.list(caller.workspaceId, page(input)), viewPermission);
  }

  /** Deletes a permission; keys and roles that held it no longer do (they refer to it by id). */
  async deletePermission(caller: Caller, input: { permission: string }): Promise<void> {
    caller.authorize(requireRbac("delete_permission"));
    const permission = await this.findPermission(caller.workspaceId, input.permission);
    if (!(await this.permissions.delete(caller.workspaceId, permission.id))) throw permissionNotFound(input.permission);
    this.audit.record(caller, {
      action: "permission.delete",
      description: `Deleted permission ${permission.id} (${permission.slug})`,
      resources: [{ type: "permission", id: permission.id }],
    });
    await this.invalidator.workspaceChanged(caller.workspaceId);
  }

  async createRole(caller: Caller, input: { name: string; description?: string; permissions?: string[] }): Promise<{ roleId: string }> {
    caller.authorize(requireRbac("create_role"));
    const slugs = input.permissions ?? [];
    if (slugs.length > 0) caller.authorize(requireRbac("add_permission_to_role"));
    const permissions = await this.permissionsForSlugs(caller.workspaceId, slugs, caller);
    const role: RoleRecord = {
      id: newId("role", this.clock.now()),
      workspaceId: caller.workspaceId,
      name: input.name,
      ...defined({ description: input.description }),
      permissionIds: permissions.map((p) => p.id),
      createdAt: this.clock.now(),
    };
    if (!(await this.roles.create(role)))
      throw new KeygateError(
        "err:unkey:data:role_already_exists",
        `A role named '${input.name}' already exists (names are compared ignoring case).`,
      );
    this.audit.record(caller, {
      action: "role.create",
      description: `Created role ${role.id} (${role.name})`,
      resources: [{ type: "role", id: role.id }, ...permissions.map((p) => ({ type: "permission", id: p.id }))],
      changes: created({
        name: role.name,
        description: role.description,
        permissions: slugs.length > 0 ? permissions.map((p) => p.slug) : undefined,
      }),
    });
    return { roleId: role.id };
  }

  async getRole(caller: Caller, input: { role: string }): Promise<RoleView> {
    caller.authorize(requireRbac("read_role"));
    const [view] = await this.viewRoles(caller.workspaceId, [await this.findRole(caller.workspaceId, input.role)]);
    return view as RoleView;
  }

  async listRoles(caller: Caller, input: ListInput): Promise<Listed<RoleView>> {
    caller.authorize(requireRbac("read_role"));
    const found = await this.roles.list(caller.workspaceId, page(input));
    const views = await this.viewRoles(caller.workspaceId, found.items);
    return { items: views, pagination: pagination(found) };
  }

  /** Deletes a role; keys that had it no longer do. */
  async deleteRole(caller: Caller, input: { role: string }): Promise<void> {
    caller.authorize(requireRbac("delete_role"));
    const role = await this.findRole(caller.workspaceId, input.role);
    if (!(await this.roles.delete(caller.workspaceId, role.id))) throw roleNotFound(input.role);
    this.audit.record(caller, {
      action: "role.delete",
      description: `Deleted role ${role.id} (${role.name})`,
      resources: [{ type: "role", id: role.id }],
    });
    await this.invalidator.workspaceChanged(caller.workspaceId);
  }

  /** Replaces a role's permissions (creating unknown slugs) and answers its permissions afterwards. */
  async setRolePermissions(caller: Caller, input: { roleId: string; permissions: string[] }): Promise<PermissionView[]> {
    caller.authorize(allOf(requireRbac("add_permission_to_role"), requireRbac("remove_permission_from_role")));
    const role = await this.findRole(caller.workspaceId, input.roleId);
    const permissions = await this.permissionsForSlugs(caller.workspaceId, input.permissions, caller);
    if (
      !(await this.roles.setPermissions(
        caller.workspaceId,
        role.id,
        permissions.map((p) => p.id),
      ))
    )
      throw roleNotFound(input.roleId);
    const before = (await this.permissions.getMany(caller.workspaceId, role.permissionIds)).map((p) => p.slug);
    this.audit.record(caller, {
      action: "role.update",
      description: `Set the permissions of role ${role.id} (${role.name})`,
      resources: [{ type: "role", id: role.id }, ...permissions.map((p) => ({ type: "permission", id: p.id }))],
      changes: [{ field: "permissions", old: before, new: permissions.map((p) => p.slug) }],
    });
    await this.invalidator.workspaceChanged(caller.workspaceId);
    return permissions.map(viewPermission);
  }

  /**
   * The permissions named by `slugs`, in order and without repeats, creating those that do not exist yet.
   * Creating needs `rbac.*.create_permission` of `creator` when one is given (keys.createKey and updateKey pass
   * null: like Unkey, they create unknown permissions freely).
   */
  async permissionsForSlugs(workspaceId: string, slugs: readonly string[], creator: Caller | null): Promise<PermissionRecord[]> {
    const wanted = [...new Set(slugs)];
    if (wanted.length === 0) return [];
    const found = await this.permissions.findManyBySlugs(workspaceId, wanted);
    const missing = wanted.filter((slug) => !found.has(slug));
    if (missing.length > 0 && creator) creator.authorize(requireRbac("create_permission"));
    for (const slug of missing) {
      const now = this.clock.now();
      const created = { id: newId("perm", now), workspaceId, name: slug, slug, createdAt: now };
      // A concurrent request may create the same slug first; then its permission is the one to use.
      const permission = (await this.permissions.create(created)) ? created : await this.permissions.findBySlug(workspaceId, slug);
      if (!permission) throw new Error(`permission '${slug}' vanished while being created`);
      found.set(slug, permission);
    }
    return wanted.map((slug) => found.get(slug) as PermissionRecord);
  }

  /** Existing permissions by slug; an unknown slug is a 404 naming it. */
  async existingPermissions(workspaceId: string, slugs: readonly string[]): Promise<PermissionRecord[]> {
    const wanted = [...new Set(slugs)];
    const found = await this.permissions.findManyBySlugs(workspaceId, wanted);
    const missing = wanted.filter((slug) => !found.has(slug));
    if (missing.length > 0) throw permissionNotFound(missing.join("', '"));
    return wanted.map((slug) => found.get(slug) as PermissionRecord);
  }

  /** Roles by id or name, in order and without repeats; an unknown one is a 404 naming it. */
  async existingRoles(workspaceId: string, namesOrIds: readonly string[]): Promise<RoleRecord[]> {
    const roles = new Map<string, RoleRecord>();
    const missing: string[] = [];
    for (const nameOrId of new Set(namesOrIds)) {
      const role = await this.lookupRole(workspaceId, nameOrId);
      if (role) roles.set(role.id, role);
      else missing.push(nameOrId);
    }
    if (missing.length > 0) throw roleNotFound(missing.join("', '"));
    return [...roles.values()];
  }

  /** Permissions by id; ids of deleted permissions are skipped. */
  permissionsById(workspaceId: string, ids: readonly string[]): Promise<PermissionRecord[]> {
    return this.permissions.getMany(workspaceId, ids);
  }

  /** Roles by id; ids of deleted roles are skipped. */
  rolesById(workspaceId: string, ids: readonly string[]): Promise<RoleRecord[]> {
    return this.roles.getMany(workspaceId, ids);
  }

  async viewPermissionsById(workspaceId: string, ids: readonly string[]): Promise<PermissionView[]> {
    return (await this.permissions.getMany(workspaceId, ids)).map(viewPermission);
  }

  /** Roles with their (still existing) permissions. */
  async viewRoles(workspaceId: string, roles: readonly RoleRecord[]): Promise<RoleView[]> {
    const permissionIds = [...new Set(roles.flatMap((role) => role.permissionIds))];
    const permissions = new Map((await this.permissions.getMany(workspaceId, permissionIds)).map((p) => [p.id, viewPermission(p)]));
    return roles.map((role) => {
      const held = role.permissionIds.map((id) => permissions.get(id)).filter((p): p is PermissionView => p !== undefined);
      return {
        id: role.id,
        name: role.name,
        ...defined({ description: role.description, permissions: held.length > 0 ? held : undefined }),
      };
    });
  }

  private async findPermission(workspaceId: string, idOrSlug: string): Promise<PermissionRecord> {
    const permission = (await this.permissions.get(workspaceId, idOrSlug)) ?? (await this.permissions.findBySlug(workspaceId, idOrSlug));
    if (!permission) throw permissionNotFound(idOrSlug);
    return permission;
  }

  private async findRole(workspaceId: string, idOrName: string): Promise<RoleRecord> {
    const role = await this.lookupRole(workspaceId, idOrName);
    if (!role) throw roleNotFound(idOrName);
    return role;
  }

  private async lookupRole(workspaceId: string, idOrName: string): Promise<RoleRecord | null> {
    return (await this.roles.get(workspaceId, idOrName)) ?? (await this.roles.findByName(workspaceId, idOrName));
  }
}

export function viewPermission(permission: PermissionRecord): PermissionView {
  return {
    id: permission.id,
    name: permission.name,
    slug: permission.slug,
    ...defined({ description: permission.description }),
  };
}

function permissionNotFound(what: string): KeygateError {
  return new KeygateError("err:unkey:data:permission_not_found", `The permission '${what}' does not exist.`);
}

function roleNotFound(what: string): KeygateError {
  return new KeygateError("err:unkey:data:role_not_found", `The role '${what}' does not exist.`);
}
